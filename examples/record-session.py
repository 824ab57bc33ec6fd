#!/usr/bin/env python3
"""Record a small, real agent trajectory for the lam examples.

Usage:
    python3 examples/record-session.py [OUT.jsonl]

Creates a throw-away git checkout of a tiny Python project (``textstats``)
with one planted bug, then plays a scripted "agent session": every step is a
real bash command run with subprocess in that checkout, and its combined
stdout+stderr and return code are recorded.  Output is written as
"lam trajectory JSONL v1", one JSON object per line:

    {"session": "edit-session", "index": 0, "action": "ls",
     "observation": "...", "returncode": 0}

If the output bytes are not valid UTF-8, "observation" is omitted and
"observation_b64" (standard base64 of the exact bytes) is written instead.

Determinism: the project is committed with a fixed author and fixed dates,
commands run with LC_ALL=C, TZ=UTC, PYTHONDONTWRITEBYTECODE=1,
PYTHONHASHSEED=0 and an isolated git configuration, the temporary directory
path is replaced by "/repo", and the one timing-dependent pattern in the
output -- unittest's "Ran N tests in 0.001s" -- is normalised to
"Ran N tests in 0.000s".  Running the script twice gives byte-identical
output.  Standard library only, no network.
"""

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SESSION = "edit-session"

# --------------------------------------------------------------------------
# The project under edit.  counter.top_n sorts by ascending count (bug); the
# docstring and the tests want descending count with alphabetical ties.
# --------------------------------------------------------------------------

FILES = {}

FILES["README.md"] = """\
# textstats

Tiny text statistics helpers: a tokenizer, word counts and a plain-text
report.  No dependencies beyond the Python standard library.

```python
from textstats import format_report

print(format_report(open("notes.txt").read(), title="Notes"))
```

## Layout

- `textstats/tokenizer.py` - `tokenize`, `sentences`, `read_text`
- `textstats/counter.py` - `word_counts`, `top_n`, `type_token_ratio`
- `textstats/report.py` - `summary`, `format_report`

## Tests

    python3 -m unittest

Test fixtures live in `tests/data/`.  `legacy_latin1.txt` is deliberately
*not* UTF-8: it is an old Latin-1 export that `read_text` must survive.
"""

FILES["pyproject.toml"] = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "textstats"
version = "0.3.1"
description = "Tiny text statistics helpers"
readme = "README.md"
requires-python = ">=3.9"
license = {text = "MIT"}

[tool.setuptools]
packages = ["textstats"]
"""

FILES[".gitignore"] = """\
__pycache__/
*.pyc
/build/
/dist/
*.egg-info/
"""

FILES["textstats/__init__.py"] = '''\
"""textstats: tiny text statistics helpers."""

from .counter import merge_counts, top_n, type_token_ratio, word_counts
from .report import format_report, summary
from .tokenizer import read_text, sentences, tokenize

__version__ = "0.3.1"

__all__ = [
    "format_report",
    "merge_counts",
    "read_text",
    "sentences",
    "summary",
    "tokenize",
    "top_n",
    "type_token_ratio",
    "word_counts",
]
'''

FILES["textstats/tokenizer.py"] = '''\
"""Tokenisation helpers.

The tokenizer is deliberately simple: it lower-cases the input, splits on
anything that is not a letter, digit or apostrophe, and strips apostrophes
from the ends of tokens so that quoted words ('like this') come out clean.
"""

import re

_WORD_RE = re.compile(r"[A-Za-z0-9']+")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\\s+")

STOPWORDS = frozenset(
    """
    a an and are as at be by for from has he in is it its of on or that the
    to was were will with
    """.split()
)


def tokenize(text, *, lower=True, drop_stopwords=False):
    """Split *text* into word tokens.

    >>> tokenize("The cat's hat, the 'big' one.")
    ['the', "cat's", 'hat', 'the', 'big', 'one']
    """
    if lower:
        text = text.lower()
    tokens = []
    for match in _WORD_RE.finditer(text):
        token = match.group(0).strip("'")
        if not token:
            continue
        if drop_stopwords and token.lower() in STOPWORDS:
            continue
        tokens.append(token)
    return tokens


def sentences(text):
    """Split *text* into sentences on '.', '!' or '?' followed by whitespace."""
    text = text.strip()
    if not text:
        return []
    return [s.strip() for s in _SENTENCE_END_RE.split(text) if s.strip()]


def read_text(path, encoding="utf-8"):
    """Read a text file, replacing undecodable bytes instead of failing.

    Some of our inputs are old Latin-1 exports; we would rather count a
    U+FFFD replacement character than crash on them.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    return data.decode(encoding, errors="replace")
'''

FILES["textstats/counter.py"] = '''\
"""Word counting and ranking."""

from collections import Counter

from .tokenizer import tokenize


def word_counts(text, *, drop_stopwords=False):
    """Return a Counter of the tokens in *text*.

    >>> word_counts("the cat and the hat")["the"]
    2
    """
    return Counter(tokenize(text, drop_stopwords=drop_stopwords))


def merge_counts(*counters):
    """Add several Counters together into a new Counter."""
    total = Counter()
    for counts in counters:
        total.update(counts)
    return total


def top_n(counts, n=10):
    """Return the *n* most frequent (word, count) pairs.

    Pairs are ordered by descending count; ties are broken alphabetically
    so that the result is stable from run to run (Counter.most_common keeps
    insertion order for ties, which depends on the input text).
    """
    if n <= 0:
        return []
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return ranked[:n]


def type_token_ratio(text):
    """Distinct tokens divided by total tokens (0.0 for empty text)."""
    tokens = tokenize(text)
    if not tokens:
        return 0.0
    return len(set(tokens)) / len(tokens)


def hapax_legomena(counts):
    """Words that occur exactly once, sorted alphabetically."""
    return sorted(word for word, count in counts.items() if count == 1)
'''

FILES["textstats/report.py"] = '''\
"""Plain-text report formatting."""

from .counter import top_n, type_token_ratio, word_counts
from .tokenizer import sentences, tokenize


def summary(text, *, n=5, drop_stopwords=True):
    """Collect the numbers shown by :func:`format_report` into a dict."""
    tokens = tokenize(text)
    counts = word_counts(text, drop_stopwords=drop_stopwords)
    return {
        "sentences": len(sentences(text)),
        "tokens": len(tokens),
        "types": len(set(tokens)),
        "ttr": round(type_token_ratio(text), 3),
        "top": top_n(counts, n),
    }


def _row(label, value):
    return f"{label:<12}{value:>8}"


def format_report(text, *, title="Report", n=5, width=20):
    """Render a short fixed-width report about *text*.

    The report has a title, four summary rows and a ranked list of the
    most frequent non-stopword words with a small bar chart.
    """
    stats = summary(text, n=n)
    lines = [title, "=" * len(title), ""]
    lines.append(_row("sentences", stats["sentences"]))
    lines.append(_row("tokens", stats["tokens"]))
    lines.append(_row("types", stats["types"]))
    lines.append(_row("ttr", f"{stats['ttr']:.3f}"))
    lines.append("")
    if not stats["top"]:
        lines.append("(no words)")
        return "\\n".join(lines) + "\\n"
    lines.append("top words:")
    for rank, (word, count) in enumerate(stats["top"], 1):
        bar = "#" * min(count, width)
        lines.append(f"{rank:>3}. {word:<12}{count:>4} {bar}")
    return "\\n".join(lines) + "\\n"
'''

FILES["tests/__init__.py"] = ""

FILES["tests/test_tokenizer.py"] = '''\
import unittest
from pathlib import Path

from textstats.tokenizer import read_text, sentences, tokenize

DATA = Path(__file__).parent / "data"


class TokenizeTest(unittest.TestCase):
    def test_lowercases_and_splits_on_punctuation(self):
        self.assertEqual(tokenize("Hello, World!"), ["hello", "world"])

    def test_keeps_inner_apostrophes(self):
        self.assertEqual(tokenize("The cat's 'big' hat"),
                         ["the", "cat's", "big", "hat"])

    def test_drop_stopwords(self):
        self.assertEqual(tokenize("The cat and the hat", drop_stopwords=True),
                         ["cat", "hat"])

    def test_empty(self):
        self.assertEqual(tokenize(""), [])
        self.assertEqual(tokenize("  ... !!"), [])


class SentencesTest(unittest.TestCase):
    def test_splits_on_terminators(self):
        self.assertEqual(sentences("One. Two! Three? Four"),
                         ["One.", "Two!", "Three?", "Four"])

    def test_blank(self):
        self.assertEqual(sentences("   "), [])


class ReadTextTest(unittest.TestCase):
    def test_latin1_file_does_not_crash(self):
        text = read_text(DATA / "legacy_latin1.txt")
        self.assertIn("\\ufffd", text)
        self.assertTrue(text.startswith("Caf"))


if __name__ == "__main__":
    unittest.main()
'''

FILES["tests/test_counter.py"] = '''\
import unittest
from collections import Counter

from textstats.counter import (hapax_legomena, merge_counts, top_n,
                               type_token_ratio, word_counts)


class WordCountsTest(unittest.TestCase):
    def test_counts_tokens(self):
        counts = word_counts("the cat and the hat")
        self.assertEqual(counts["the"], 2)
        self.assertEqual(counts["cat"], 1)

    def test_drop_stopwords(self):
        counts = word_counts("the cat and the hat", drop_stopwords=True)
        self.assertNotIn("the", counts)

    def test_merge(self):
        merged = merge_counts(Counter(a=1), Counter(a=2, b=1))
        self.assertEqual(merged, Counter(a=3, b=1))


class TopNTest(unittest.TestCase):
    def test_top_n_orders_by_count_then_word(self):
        counts = Counter({"pear": 2, "apple": 5, "fig": 2, "kiwi": 1})
        self.assertEqual(top_n(counts, 3),
                         [("apple", 5), ("fig", 2), ("pear", 2)])

    def test_top_n_zero(self):
        self.assertEqual(top_n(Counter(a=1), 0), [])

    def test_top_n_more_than_vocabulary(self):
        self.assertEqual(top_n(Counter(a=1), 5), [("a", 1)])


class MiscTest(unittest.TestCase):
    def test_type_token_ratio(self):
        self.assertAlmostEqual(type_token_ratio("a b a b"), 0.5)
        self.assertEqual(type_token_ratio(""), 0.0)

    def test_hapax(self):
        self.assertEqual(hapax_legomena(Counter(b=1, a=1, c=2)), ["a", "b"])


if __name__ == "__main__":
    unittest.main()
'''

FILES["tests/test_report.py"] = '''\
import unittest

from textstats.report import format_report, summary

TEXT = ("The cat sat on the mat. The cat saw a dog! "
        "The dog ran. Did the cat run?")

EXPECTED = """\\
Pets
====

sentences          4
tokens            18
types             11
ttr            0.611

top words:
  1. cat            3 ###
  2. dog            2 ##
  3. did            1 #
  4. mat            1 #
  5. ran            1 #
"""


class ReportTest(unittest.TestCase):
    def test_summary_numbers(self):
        stats = summary(TEXT)
        self.assertEqual(stats["sentences"], 4)
        self.assertEqual(stats["tokens"], 18)

    def test_full_report(self):
        self.assertEqual(format_report(TEXT, title="Pets"), EXPECTED)

    def test_empty_text(self):
        self.assertIn("(no words)", format_report("", title="Empty"))


if __name__ == "__main__":
    unittest.main()
'''

# Deliberately not UTF-8: an old Latin-1 export used as a fixture.
BINARY_FILES = {
    "tests/data/legacy_latin1.txt": (
        b"Caf\xe9 cr\xe8me br\xfbl\xe9e. Na\xefve r\xe9sum\xe9 \xe0 la carte!\n"
        b"Stra\xdfe, \xa9 1998 Soci\xe9t\xe9 G\xe9n\xe9rale.\n"
    ),
}

# --------------------------------------------------------------------------
# The scripted session.  Every string is run verbatim with `bash -c`.
# --------------------------------------------------------------------------

WRONG_EDIT = ("sed -i 's/key=lambda kv: (kv\\[1\\], kv\\[0\\]))/"
              "key=lambda kv: (kv[1], kv[0]), reverse=True)/' "
              "textstats/counter.py")

RIGHT_EDIT = ("python3 -c \"import pathlib; p = pathlib.Path('textstats/counter.py'); "
              "s = p.read_text(); "
              "p.write_text(s.replace('key=lambda kv: (kv[1], kv[0]), reverse=True)', "
              "'key=lambda kv: (-kv[1], kv[0]))'))\"")

STEPS = [
    "ls",
    "cat README.md",
    "ls -R",
    "find . -name '*.py' -not -path './.git/*' | sort",
    "cat pyproject.toml",
    "python3 -m unittest",
    "python3 -m unittest -v",
    "cat textstats/counter.py",
    "cat tests/test_counter.py",
    "git grep -n top_n",
    "cat textstats/report.py",
    "sed -n 1,60p tests/test_report.py",
    "sed -n 1,60p textstats/tokenizer.py",
    "head -c 64 tests/data/legacy_latin1.txt",
    "git log --oneline",
    "nl -ba textstats/counter.py | sed -n 25,40p",
    WRONG_EDIT,
    "cat textstats/counter.py",
    "python3 -m unittest",
    "python3 -m unittest tests.test_counter -v",
    "cat textstats/counter.py",
    RIGHT_EDIT,
    "sed -n 25,40p textstats/counter.py",
    "python3 -m unittest",
    "python3 -m unittest -v",
    "grep -n 'sorted' textstats/*.py",
    "git diff",
    "git status",
    "cat textstats/report.py",
    "python3 -m unittest",
    "git diff --stat",
    "ls -R",
    "python3 -m unittest",
]

GIT_ENV = {
    "GIT_AUTHOR_NAME": "lam example",
    "GIT_AUTHOR_EMAIL": "example@lam.invalid",
    "GIT_COMMITTER_NAME": "lam example",
    "GIT_COMMITTER_EMAIL": "example@lam.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T12:00:00+0000",
    "GIT_COMMITTER_DATE": "2024-01-01T12:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_PAGER": "cat",
}

# unittest prints wall-clock time ("Ran 33 tests in 0.004s"); that is the
# only nondeterministic text in the session, so it is normalised to 0.000s.
TIMING_RE = re.compile(rb"(Ran \d+ tests? in )\d+\.\d+s")


def make_env(home):
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": home,
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
        "TERM": "dumb",
        "PAGER": "cat",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        **GIT_ENV,
    }


def write_project(root):
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    for rel, data in BINARY_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def git(root, env, *args):
    subprocess.run(["git", *args], cwd=root, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_step(cmd, root, env, tmp_strings):
    proc = subprocess.run(["bash", "-c", cmd], cwd=root, env=env,
                          stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout
    for s in tmp_strings:
        out = out.replace(s, b"/repo")
    out = TIMING_RE.sub(rb"\g<1>0.000s", out)
    return out, proc.returncode


def main(argv):
    here = Path(__file__).resolve().parent
    out_path = Path(argv[1]) if len(argv) > 1 else here / "edit-session.jsonl"

    records = []
    with tempfile.TemporaryDirectory(prefix="lam-example-") as tmp:
        root = Path(tmp) / "textstats"
        root.mkdir()
        env = make_env(tmp)
        # Longest first so that /private/tmp/... style realpaths win.
        tmp_strings = sorted({str(root).encode(), os.path.realpath(root).encode()},
                             key=len, reverse=True)

        write_project(root)
        git(root, env, "-c", "init.defaultBranch=main", "init", "-q")
        git(root, env, "add", "-A")
        git(root, env, "commit", "-q", "-m", "textstats 0.3.1")

        for index, cmd in enumerate(STEPS):
            out, rc = run_step(cmd, root, env, tmp_strings)
            rec = {"session": SESSION, "index": index, "action": cmd}
            try:
                rec["observation"] = out.decode("utf-8")
            except UnicodeDecodeError:
                rec["observation_b64"] = base64.b64encode(out).decode("ascii")
            rec["returncode"] = rc
            records.append((rec, out))

    with open(out_path, "w", encoding="utf-8", newline="\n") as fh:
        for rec, _ in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")

    seen = set()
    repeats = 0
    total = 0
    non_utf8 = 0
    for rec, out in records:
        total += len(out)
        if out in seen:
            repeats += 1
        seen.add(out)
        if "observation_b64" in rec:
            non_utf8 += 1
    print(f"wrote {out_path}")
    print(f"records: {len(records)}")
    print(f"total observation bytes: {total}")
    print(f"exact repeats of an earlier observation: {repeats}")
    print(f"non-UTF-8 observations (observation_b64): {non_utf8}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
