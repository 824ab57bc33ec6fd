"""The real Claude Code, Codex, Gemini CLI and opencode (pinned, installed
from npm by scripts/install-agents.sh) run through `lam run` against a
scripted loopback upstream (scripted_upstream.py) on a real folder: the
agent really runs `cat`, `Read`, `ls`, `python3`, reads a file twice and a
near copy of it, and finally calls lam's MCP `recall` on a `§id` from a stub
it was sent.

Checked for each agent (Claude Code; Codex in its default code mode, where
tools run inside a JavaScript `exec`; Codex with a model that gets plain
function tools; Gemini CLI, `gemini -p TASK --yolo --skip-trust`, on the
Gemini API, and opencode, `opencode run --auto TASK`, on Messages: each in
its `-changes` run and its budget run):

- the agent and `lam run` exit 0, and the scripted conversation completes;
- every model request reached the upstream through the proxy (the agent is
  never told the upstream's address), and each conversation made one proxy
  session: a request the agent sends on its own beside its conversation
  (opencode's title, Gemini CLI's routing classifier: `side`) is a
  conversation, and a session, of its own;
- observations admitted = non-empty tool-result texts sent;
- no earlier item changed from one request to the next (apart from what
  the client itself rewrites: moved `cache_control` marks and a one-block
  message written as a list or a string);
- stubs replaced repeated output (L0/L1 fired), tool-result tokens fell;
- no line the model had not seen was withheld: every tool result with a
  stub is recalled (`lam recall`) and each of its new lines (text, line
  number and spaces aside, in no earlier tool result of the conversation)
  is in what was forwarded, byte for byte;
- in the `-changes` runs (a file edited then read again, a check re-run
  whose output changes in two lines, the first read of 40 alike rows),
  every changed line and every row reached the upstream, and the re-reads
  were still cut;
- the MCP recall tool is listed to the model and its scripted call returned
  exactly the bytes `lam recall` reads from the archive;
- in the `-fork` runs (Claude Code's `Agent` with `subagent_type: "fork"`;
  Codex's `spawn_agent` with `fork_turns: "all"` under `--enable
  multi_agent_v2`), the fork and the parent each get a proxy session, the
  fork admits only what follows the history it shares with its parent
  (Codex; Claude Code's fork has a system prompt of its own, so the proxy
  admits its whole history again), and every shared history item, up to
  and with the fork call, is forwarded the same in the fork's first request
  as in the parent's continuation.

- in the budget runs (`claude-code-budget`, `claude-code-budget-dense`,
  `codex-budget`, `gemini-budget`, `opencode-budget`), each agent reads 40
  outputs totalling 1.8 times the window it compacts in, through `lam run
  --budget 50000`, against an upstream that reports honest `usage` and
  answers the agent's own compaction: no request over the budget on the
  upstream's count, every prefix change a cut lam counted, no compaction
  from the agent (Gemini CLI: neither a compression request nor a masked
  tool output), and the very first output recalled exactly by its
  citation's `§id`; straight to the upstream (`-direct`) the agent does
  compact.
- in the cold-cache runs (`claude-code-budget-cold`, `codex-budget-cold`),
  the agent reads 24 outputs through `lam run --budget 50000 --cache-ttl 3`,
  and the command of the tenth sleeps 6 s first: the first request after
  that gap (its input above the target, half the budget, and under the
  budget) is cut, and the summary counts a cold cut (`C cold`); otherwise the same
  checks as the budget runs (every prefix change a cut lam counted, none
  over the budget, no compaction, exact recall, no new line hidden).

Prints one table row per agent (requests, proxy sessions, admitted/sent,
tool-result tokens in -> forwarded, earlier bytes changed, proxy-added ms
p50/p99) and writes them to REPORT (JSON).

usage: real_agents_test.py LAM AGENTS_DIR WORK REPORT [--encoder bert|hashing] [--only RUN,...]
Exits 0 with a line starting `SKIPPED` when no agent is installed; the
runs of an agent that is not installed print `SKIPPED` and are left out.
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2] / "lam-serve" / "tests" / "sdk")]
import scripted_upstream as su  # noqa: E402
from raw_json import identity, raw_items  # noqa: E402

TASK = "Look at app.py and run check.py"
LOG = re.compile(r"lam serve: (\w+) (\S+) -> (\d+) session (\S+) in ([0-9.]+) ms")
TOTAL = re.compile(r"lam run: total: (\d+) sessions?, (\d+) requests, (\d+) observations(?: \([^)]*\))?, tool-result tokens (\d+) -> (\d+)")
SESSION = re.compile(r"lam run: session (\S+) \(conversation \d+\): ")
BUDGET_LINE = re.compile(r"lam run: total: .*; budget: (\d+) cuts, (\d+) citations, peak input (\d+) \(lam's count\), (\d+) over, "
                         r"upstream's count of the last (\d+) \(x([0-9.]+)\)")


# The agents each run needs installed (the runs of an agent that is not are
# skipped, saying so); the runs not named here need Claude Code or Codex.
NEEDS = {"gemini": "gemini", "opencode": "opencode"}


def needs(name):
    """The program a run needs: its name's first word."""
    first = name.split("-")[0]
    return NEEDS.get(first, "claude" if first == "claude" else "codex")


def agents(bin_dir):
    claude, codex = str(bin_dir / "claude"), str(bin_dir / "codex")
    allowed = ["--allowedTools", "Bash,Read,Agent,mcp__lam__recall"]
    one = [su.SCRIPT]
    # Each new agent's own request beside its conversation (`side`): Gemini
    # CLI's routing classifier, opencode's title; each a proxy conversation
    # of its own.
    gemini = {"api": "gemini", "cmd": [str(bin_dir / "gemini"), "-p", TASK, "--yolo", "--skip-trust"], "side": 1}
    opencode = {"api": "messages", "cmd": [str(bin_dir / "opencode"), "run", "--auto", TASK], "side": 1}
    return {
        "claude-code": {"api": "messages", "cmd": [claude, "-p", TASK, *allowed], "scripts": one},
        "claude-code-subagent": {"api": "messages", "cmd": [claude, "-p", TASK, *allowed], "scripts": [su.WITH_SUBAGENT, su.SUBAGENT_SCRIPT]},
        "codex": {"api": "responses", "cmd": [codex, "exec", "--skip-git-repo-check", TASK], "scripts": one},
        "codex-functions": {"api": "responses", "cmd": [codex, "exec", "-m", "gpt-5.2", "--skip-git-repo-check", TASK], "scripts": one},
        "claude-code-changes": {"api": "messages", "cmd": [claude, "-p", TASK, *allowed], "scripts": [su.CHANGES]},
        "codex-changes": {"api": "responses", "cmd": [codex, "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", TASK],
                          "scripts": [su.CHANGES]},
        "claude-code-fork": {"api": "messages", "cmd": [claude, "-p", TASK, *allowed], "scripts": [su.WITH_FORK, su.FORK_SCRIPT]},
        "codex-fork": {"api": "responses", "cmd": [codex, "exec", "--enable", "multi_agent_v2", "--skip-git-repo-check", TASK],
                       "scripts": [su.WITH_FORK_WAIT, su.FORK_SCRIPT]},
        "gemini-changes": dict(gemini, scripts=[su.CHANGES]),
        "opencode-changes": dict(opencode, scripts=[su.CHANGES]),
    }


# What the `-changes` runs must forward: (script step, lines), each line as
# printed (a file line may carry a line-number prefix before it).
ROWS = ["print('row %d: value', %d * %d + 7, 'ok')" % (i, i, i) for i in range(40)]
CHANGED = [(2, ["SCALE = 4"]), (4, ["# a line inserted above line 10"]),
           (7, ["tests/test_sampled.py::test_case_3 PASSED", "tests/test_sampled.py::test_case_17 PASSED", "========== 25 passed in 0.01s =========="]), (8, ROWS)]
# Steps that read what the model has seen before: their tool-result tokens must fall.
REREADS = [2, 4, 7]


# ------------------------------------------------------------------- a run

def workdir(root):
    w = root / "work"
    w.mkdir()
    lines = ["def f%d(x):\n    return x * %d + 1  # helper number %d\n" % (i, i, i) for i in range(1, 61)]
    (w / "app.py").write_text("".join(lines))
    lines[6] = "def f7(x):\n    return x * 7 + 2  # helper number seven, changed\n"
    (w / "app_v2.py").write_text("".join(lines))
    (w / "check.py").write_text('import app\nfor i in range(1, 61):\n    print("check", i, getattr(app, "f%d" % i)(2))\n')
    big = ["    result_%d = transform(values[%d], scale=SCALE, offset=%d)\n" % (i, i, 3 * i) for i in range(2, 53)]
    (w / "big.py").write_text("SCALE = 3\n" + "".join(big))
    (w / "rows.py").write_text("".join(r + "\n" for r in ROWS))
    (w / "check2.py").write_text(
        "import os\nfixed = os.path.exists('state.txt')\nprint('=' * 29, 'test session starts', '=' * 30)\nprint('collected 25 items')\n"
        "for i in range(25):\n    bad = i in (3, 17) and not fixed\n    print('tests/test_sampled.py::test_case_%d %s' % (i, 'FAILED' if bad else 'PASSED'))\n"
        "print('=' * 10, '25 passed in 0.01s' if fixed else '2 failed, 23 passed in 0.01s', '=' * 10)\n")
    return w


# opencode's model, in the user's config file: the one its Anthropic
# provider is asked for (the title goes to the provider's small model).
OPENCODE_MODEL = "claude-sonnet-4-5"


def agent_env(root):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "OPENAI_", "CODEX_", "CLAUDE_", "GEMINI_", "GOOGLE_", "OPENCODE_", "XDG_"))}
    # lam's model and cache stay where they are installed; the agents get a fresh home.
    env["LAM_HOME"] = os.environ.get("LAM_HOME") or str(Path.home() / ".cache" / "lam")
    home = root / "home"
    (root / "codex-home").mkdir()
    home.mkdir()
    xdg = {k: str(home / d) for k, d in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                                         ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state"))}
    env.update(HOME=str(home), CODEX_HOME=str(root / "codex-home"), ANTHROPIC_API_KEY="sk-ant-lam-test-not-a-key",
               OPENAI_API_KEY="sk-lam-test-not-a-key", GEMINI_API_KEY="lam-test-not-a-key", DISABLE_AUTOUPDATER="1", NO_COLOR="1",
               OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_AUTOUPDATE="1", **xdg)
    # Each run's folder (run_agent, budget_run): opencode takes its project from PWD, not from the cwd.
    env["PWD"] = str(root / "work")
    gemini_settings(env, {})
    opencode_config(env, {})
    return env


def gemini_settings(env, settings):
    """Gemini CLI's user settings (`~/.gemini/settings.json`) in the run's home."""
    d = Path(env["HOME"]) / ".gemini"
    d.mkdir(parents=True, exist_ok=True)
    (d / "settings.json").write_text(json.dumps(settings))


def opencode_config(env, config):
    """opencode's user config (`$XDG_CONFIG_HOME/opencode/opencode.json`):
    its model, no sharing, no update, and `config` over them."""
    d = Path(env["XDG_CONFIG_HOME"]) / "opencode"
    d.mkdir(parents=True, exist_ok=True)
    base = {"model": "anthropic/" + OPENCODE_MODEL, "autoupdate": False, "share": "disabled"}
    (d / "opencode.json").write_text(json.dumps(dict(base, **config)))


def run_agent(lam, name, spec, root, encoder):
    work = workdir(root)
    up = su.Upstream(str(work), record=str(root / "upstream.jsonl"), script=spec["scripts"][0]).start()
    store = root / "store"
    cmd = [lam, "run", "--log", "--encoder", encoder, "--store", str(store), "--upstream", up.url, "--", *spec["cmd"]]
    try:
        rc, out, err = run_bounded(cmd, work, agent_env(root), 180)
    finally:
        up.shutdown()
    return {"name": name, "api": spec["api"], "scripts": spec["scripts"], "side": spec.get("side", 0), "rc": rc,
            "stdout": out, "stderr": err, "seen": list(up.seen), "store": str(store)}


def run_bounded(cmd, cwd, env, limit):
    """(exit code, stdout, stderr) of `cmd` in a process group of its own,
    which is killed after `limit` seconds (the code is then "killed after
    LIMIT s"), so that an agent that hangs fails its run, not the test."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=limit)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = f"killed after {limit} s"
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


# -------------------------------------------------------------- measuring

# Per API: the body's conversation list and what sets it up outside it.
FIELD = {"messages": "messages", "responses": "input", "gemini": "contents"}
PREAMBLE = {"messages": "system", "responses": "instructions", "gemini": "systemInstruction"}
GEMINI_MODEL_PATH = re.compile(r"/models/[^/]+:(?:stream)?[gG]enerateContent$")


def model_path(api, path):
    """Whether a request path (query aside) is one of the API's model requests."""
    path = path.split("?")[0]
    if api == "gemini":
        return bool(GEMINI_MODEL_PATH.search(path))
    return path.endswith("/messages" if api == "messages" else "/responses")


def model_requests(run):
    return [e for e in run["seen"] if e["method"] == "POST" and model_path(run["api"], e["path"])]


def offers_tools(run, body):
    """Whether a request offers the agent's tools (a conversation's, not a
    title, a routing classifier or a quota probe)."""
    b = json.loads(body)
    return bool(su.gemini_tools(b) if run["api"] == "gemini" else su.tool_list(b) or b.get("tools"))


def conversation(run, body):
    return json.loads(body)[FIELD[run["api"]]]


def text_slots(content, types):
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, list):
        return [b["text"] for b in content if isinstance(b, dict) and b.get("type") in types and b.get("text")]
    return []


def gemini_result(part):
    """(call id, [text]) of a `functionResponse` part: its `response.output`
    (or `error`), the text the agent sent."""
    fr = part["functionResponse"]
    r = fr.get("response") if isinstance(fr.get("response"), dict) else {}
    text = r.get("output", r.get("error"))
    return fr.get("id") or fr.get("name"), [text] if isinstance(text, str) and text else []


def tool_results(run, items):
    """(call id, [texts]) of every tool result of a conversation, in order."""
    out = []
    for it in items:
        if run["api"] == "gemini":
            out += [gemini_result(p) for p in it.get("parts") or [] if isinstance(p, dict) and "functionResponse" in p]
        elif run["api"] == "messages":
            for b in it.get("content") if isinstance(it.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    out.append((b["tool_use_id"], text_slots(b.get("content"), ("text",))))
        elif it.get("type") in ("function_call_output", "custom_tool_call_output"):
            out.append((it["call_id"], text_slots(it.get("output"), ("input_text", "output_text", "text"))))
    return out


def recall_call(run, items):
    """The call id of the scripted recall call in a conversation."""
    for it in items:
        if run["api"] == "gemini":
            for p in it.get("parts") or []:
                fc = p.get("functionCall") if isinstance(p, dict) else None
                if fc and fc.get("name") in su.RECALL_TOOLS:
                    return fc.get("id") or fc["name"], fc["args"]["id"]
        elif run["api"] == "messages":
            for b in it.get("content") if isinstance(it.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in su.RECALL_TOOLS:
                    return b["id"], b["input"]["id"]
        elif it.get("type") == "custom_tool_call" and "mcp__lam__recall" in it.get("input", ""):
            return it["call_id"], re.search(r'"id": "([0-9a-f]+)"', it["input"]).group(1)
        elif it.get("type") == "function_call" and it.get("namespace", "").startswith("mcp__lam") and it.get("name") == "recall":
            return it["call_id"], json.loads(it["arguments"])["id"]
    return None, None


def recall_listed(run, first_body):
    body = json.loads(first_body)
    if run["api"] == "gemini":
        return bool(set(su.RECALL_TOOLS) & set(su.gemini_tools(body)))
    if run["api"] == "messages":
        return bool(set(su.RECALL_TOOLS) & {t.get("name") for t in body.get("tools", [])})
    if ("mcp__lam", "recall") in su.tool_list(body):
        return True
    # Code mode lists MCP servers as deferred namespaces in a developer message.
    return "Deferred tool namespaces:\\n- mcp__lam:" in first_body


def raw_conversation(run, body):
    """A request's conversation items as the proxy's identity reads them
    (`raw_json.identity`: marks and the one-block shorthand aside)."""
    return [identity(x) for x in raw_items(body, FIELD[run["api"]])]


def is_fork(run, e):
    return su.fork_child(run["api"], json.loads(e["body"]))


def conversations(run, reqs):
    """The requests of each conversation (a subagent's is its own, and so is
    a fork's, and a request on its own such as opencode's title or Gemini
    CLI's routing classifier), in order: grouped by their preamble, their
    first item and by branch."""
    out = {}
    for e in reqs:
        out.setdefault((preamble(run, e["body"]), raw_conversation(run, e["body"])[0], is_fork(run, e)), []).append(e)
    return list(out.values())


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def fork_at(run, items):
    """The index of the item holding the fork call, or None."""
    return next((i for i, raw in enumerate(items) if su.FORK_TASK in raw and ('"tool_use"' in raw or '"function_call"' in raw)), None)


def preamble(run, body):
    """What sets a conversation up outside its list (`system`,
    `instructions`), as the proxy's identity reads it."""
    v = json.loads(body).get(PREAMBLE[run["api"]])
    return identity(json.dumps(v))


def own_items(run, convs):
    """Each conversation's last request's items that its proxy session
    admits: all of them, but a fork with its parent's preamble and first item
    gets a session that starts from the parent's (lam-serve's registry::fork)
    and admits only what follows the history it shares with the parent.
    Claude Code's fork has a system prompt of its own (its billing header
    says `cc_is_subagent=true;`), so to the proxy it is a new conversation."""
    out = []
    parent = next(p for p in convs if not is_fork(run, p[0]))
    for c in convs:
        items = conversation(run, c[-1]["body"])
        if is_fork(run, c[0]) and preamble(run, c[0]["body"]) == preamble(run, parent[-1]["body"]):
            child, history = raw_conversation(run, c[0]["body"]), raw_conversation(run, parent[-1]["body"])
            items = items[common_prefix(child, history) if child[0] == history[0] else 0:]
        out.append(items)
    return out


def same_item(a, b):
    """Whether two raw items (annotations removed) are the same bytes, or,
    where the client wrote them differently, the same apart from the item's
    own `id` (Codex gives anew the ids of some items it copies into a fork)
    and the one-text-block shorthand (`raw_json.identity`)."""
    if a == b:
        return True
    x, y = json.loads(a), json.loads(b)
    if isinstance(x.get("id"), str) and isinstance(y.get("id"), str):
        y["id"] = x["id"]
    return identity(json.dumps(x)) == identity(json.dumps(y))


def branch_changed(run, convs):
    """(shared items, of those forwarded differently to the parent's
    continuation and the fork's first request, stub lines among them): the
    history both branches share, up to and with the fork call, must be the
    same bytes in both."""
    forks = [c for c in convs if is_fork(run, c[0])]
    if not forks:
        return 0, 0, 0
    child = raw_conversation(run, forks[0][0]["body"])
    parent = next(raw_conversation(run, p[-1]["body"]) for p in convs if not is_fork(run, p[0]))
    at = fork_at(run, child)
    assert at is not None and fork_at(run, parent) == at, "the fork call is not at the same place in both branches"
    changed = sum(1 for i in range(at + 1) if not same_item(parent[i], child[i]))
    return at + 1, changed, sum(child[i].count("[lam: ") for i in range(at + 1))


def earlier_changed(run, reqs):
    """Earlier items forwarded differently in a later request, apart from
    what the client itself rewrites: its `cache_control` marks and the
    one-text-block shorthand (`raw_json.identity`)."""
    changed, prev = 0, None
    for e in reqs:
        items = raw_conversation(run, e["body"])
        if prev is not None:
            changed += sum(1 for i in range(min(len(prev), len(items))) if items[i] != prev[i]) + max(0, len(prev) - len(items))
        prev = items
    return changed


def added_ms(run, reqs):
    logged = [float(m.group(5)) for m in LOG.finditer(run["stderr"]) if m.group(1) == "POST" and m.group(3) == "200"
              and model_path(run["api"], m.group(2))]
    assert len(logged) == len(reqs), f"{len(logged)} logged model requests, {len(reqs)} upstream"
    return [max(0.0, ms - e["handler_s"] * 1e3) for ms, e in zip(logged, reqs)]


def measure(lam, run):
    reqs = model_requests(run)
    err = run["stderr"]
    assert any(offers_tools(run, e["body"]) for e in reqs), \
        f"{run['name']}: exit {run['rc']}, no model request of the conversation reached the upstream " \
        f"(paths: {sorted({e['path'] for e in run['seen']})})\n{err[-3000:]}\n--- agent stdout ---\n{run['stdout'][-1000:]}"
    total = TOTAL.search(err)
    assert total, f"no summary from lam run:\n{err[-3000:]}"
    sessions, n_req, admitted, tin, tout = (int(x) for x in total.groups())
    convs = conversations(run, reqs)
    lasts = [conversation(run, c[-1]["body"]) for c in convs]
    results = [r for last in lasts for r in tool_results(run, last)]
    sent = sum(len(t) for items in own_items(run, convs) for _, t in tool_results(run, items))
    steps = script_results(run, convs)
    shared, shared_changed, shared_stubs = branch_changed(run, convs)
    call, rid = next((x for x in (recall_call(run, last) for last in lasts) if x[0]), (None, None))
    recalled = recall(lam, run, rid) if rid else None
    got = next((t for c, t in results if c == call), [])
    ms = added_ms(run, reqs)
    new = hidden = 0
    for last in lasts:
        n, h = hidden_lines(lam, run, [x for _, t in tool_results(run, last) for x in t])
        new, hidden = new + n, hidden + len(h)
    sent_changed, missing = changed_lines(run, results) if run["scripts"] == [su.CHANGES] else (0, [])
    fell = [k for k in REREADS if k < len(results) and any(STUB_LINE.search(x) for x in results[k][1])] if run["scripts"] == [su.CHANGES] else []
    return {
        "agent": run["name"], "exit": run["rc"], "requests": len(reqs), "conversations": len(convs), "proxy_requests": n_req, "proxy_sessions": sessions,
        "tool_results": steps, "sent_texts": sent, "fork_shared_items": shared, "fork_shared_changed": shared_changed, "fork_shared_stubs": shared_stubs, "admitted": admitted, "tokens_in": tin, "tokens_out": tout,
        "earlier_changed": sum(earlier_changed(run, c) for c in convs), "stubs": sum(len(STUB_LINE.findall(x)) for _, t in results for x in t),
        "recall_listed": recall_listed(run, next((e["body"] for e in reqs if offers_tools(run, e["body"])), "{}")), "recall_id": rid,
        "recall_exact": recalled is not None and len(recalled) > 0 and recalled in [unwrap(t) for t in got],
        "new_lines": new, "new_lines_hidden": hidden, "changed_sent": sent_changed, "changed_reached": sent_changed - len(missing), "changed_missing": missing, "rereads_cut": len(fell),
        "done": "DONE." in run["stdout"], "added_ms_p50": statistics.median(ms), "added_ms_p99": max(ms) if len(ms) < 100 else sorted(ms)[int(len(ms) * 0.99)],
        "upstream_paths": sorted({e["method"] + " " + e["path"].split("?")[0] for e in run["seen"]}),
    }


def script_results(run, convs):
    """Tool results answering script steps: a fork's count from its answer
    to the fork call (the history before it is its parent's)."""
    n = 0
    for c in convs:
        items = raw_conversation(run, c[-1]["body"])
        at = fork_at(run, items) if is_fork(run, c[0]) else None
        n += len(tool_results(run, [json.loads(x) for x in items[at + 1 if at is not None else 0:]]))
    return n


STUB_LINE = re.compile(r"^\[lam: .*\]$", re.M)
NUMBERED = re.compile(r"^ *[1-9][0-9]{0,8}(?:\t|\u2192)")
# What an agent writes before a line of its own tools' output: opencode's
# `read` numbers lines `12: ` (lam does not read that as a number), Gemini
# CLI's shell opens its output with `Output: `; only the changed-line check
# takes these off.
COLON_NUMBERED = re.compile(r"^(?:[1-9][0-9]{0,8}: |Output: )")


def key(line):
    """The text a line is compared by (lam_core::newlines::key): a line-number
    prefix (`   12→`, `    12\t`) removed, then spaces trimmed."""
    line = line[:-1] if line.endswith("\r") else line
    m = NUMBERED.match(line)
    return (line[m.end():] if m else line).strip()


def originals(lam, run, texts):
    """Each forwarded tool-result text's original: itself when it holds no
    stub, else what `lam recall` returns for the id its stub line names."""
    out = []
    for t in texts:
        ids = su.STUB_ID.findall(t) if STUB_LINE.search(t) else []
        out.append(recall(lam, run, ids[0]) if ids else t)
    return out


def hidden_lines(lam, run, texts):
    """(new lines, new lines the forwarded texts withhold) over one
    conversation's tool-result texts, in order."""
    seen, new, hidden = set(), 0, []
    for fwd, orig in zip(texts, originals(lam, run, texts)):
        assert orig is not None, "a stubbed tool result could not be recalled"
        shown = set(fwd.split("\n"))
        for line in orig.split("\n"):
            k = key(line)
            if not k or k in seen:
                continue
            seen.add(k)
            new += 1
            if fwd != orig and line not in shown:
                hidden.append(line)
    return new, hidden


def changed_lines(run, results):
    """(changed lines sent, those not forwarded) of a `-changes` run."""
    steps = [t for _, t in results]
    sent, missing = 0, []
    for k, lines in CHANGED:
        shown = {COLON_NUMBERED.sub("", key(x)) for t in steps[k] for x in t.split("\n")} if k < len(steps) else set()
        sent += len(lines)
        missing += [x for x in lines if x not in shown]
    return sent, missing


# Gemini CLI hands the model an MCP tool's text inside this envelope, with
# the closing tag escaped inside it (its `wrapUntrusted`).
UNTRUSTED = ("<untrusted_context>\n", "\n</untrusted_context>")
UNTRUSTED_ESCAPED = ("</untrusted_context>", "&lt;/untrusted_context&gt;")


def unwrap(text):
    """A tool result's text as the tool returned it: Gemini CLI's envelope
    around an MCP tool's text taken off and its escape undone, byte for
    byte (a text holding the escape itself would not come back)."""
    head, tail = UNTRUSTED
    if not (text.startswith(head) and text.endswith(tail) and len(text) >= len(head) + len(tail)):
        return text
    return text[len(head):len(text) - len(tail)].replace(UNTRUSTED_ESCAPED[1], UNTRUSTED_ESCAPED[0])


def recall(lam, run, rid):
    """`lam recall` of §rid, in whichever session of the run holds it."""
    for session in SESSION.findall(run["stderr"]):
        r = subprocess.run([lam, "recall", "--store", run["store"], "--session", session, "§" + rid], capture_output=True)
        if r.returncode == 0:
            return r.stdout.decode()
    return None


def check(m, run):
    what = f"{m['agent']}: "
    tail = run["stderr"][-4000:] + "\n--- agent stdout ---\n" + run["stdout"][-2000:]
    scripts = run["scripts"]
    steps = sum(len(s) for s in scripts)
    # The conversations: the script's, and the agent's requests on their own (`side`).
    convs = len(scripts) + run["side"]
    assert m["exit"] == 0, what + f"lam run exited {m['exit']}\n{tail}"
    assert m["done"], what + "the scripted conversation did not finish\n" + tail
    assert m["conversations"] == convs, what + f"{m['conversations']} conversations upstream, the script has {len(scripts)} (+{run['side']} on their own)"
    assert m["requests"] == steps + convs, what + f"{m['requests']} model requests upstream, the script needs {steps + convs}"
    assert m["proxy_requests"] == m["requests"], what + f"the proxy saw {m['proxy_requests']} model requests, the upstream {m['requests']}\n{tail}"
    assert m["proxy_sessions"] == convs, what + f"{m['proxy_sessions']} proxy sessions for {convs} conversations\n{tail}"
    forks = sum(1 for s in scripts if s is su.FORK_SCRIPT)
    assert m["tool_results"] == steps + forks, what + f"{m['tool_results']} tool results in the conversations' last requests, the script has {steps} (+{forks} fork answers)"
    assert m["fork_shared_changed"] == 0 and (m["fork_shared_items"] > 0) == (forks > 0), \
        what + f"{m['fork_shared_changed']} of {m['fork_shared_items']} history items both branches share were forwarded differently"
    assert m["fork_shared_stubs"] > 0 or not forks, what + "no stub in the history both branches share"
    assert m["admitted"] == m["sent_texts"], what + f"admitted {m['admitted']}, tool-result texts sent {m['sent_texts']}"
    assert m["earlier_changed"] == 0, what + f"{m['earlier_changed']} earlier items changed"
    assert m["stubs"] >= 2 and m["tokens_out"] < m["tokens_in"], what + f"{m['stubs']} stubs, tokens {m['tokens_in']} -> {m['tokens_out']}"
    assert m["recall_listed"], what + "the MCP recall tool is not listed to the model"
    assert m["recall_exact"], what + f"recall of §{m['recall_id']} did not return the archived bytes"
    assert m["new_lines"] > 0 and m["new_lines_hidden"] == 0, what + f"{m['new_lines_hidden']} of {m['new_lines']} new lines withheld"
    if scripts == [su.CHANGES]:
        assert not m["changed_missing"], what + f"{m['changed_reached']} of {m['changed_sent']} changed lines reached the upstream; not: {m['changed_missing']}"
        assert m["rereads_cut"] == len(REREADS), what + f"only {m['rereads_cut']} of {len(REREADS)} re-reads were cut"


def table(rows):
    head = ("| agent | conversations | requests | proxy sessions | admitted / sent | tool-result tokens in -> fwd | earlier bytes changed "
            "| new lines hidden | changed lines reaching / sent | added ms p50 / p99 | recall exact |")
    out = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in rows:
        out.append(f"| {m['agent']} | {m['conversations']} | {m['requests']} | {m['proxy_sessions']} | {m['admitted']} / {m['sent_texts']} | "
                   f"{m['tokens_in']:,} -> {m['tokens_out']:,} | {m['earlier_changed']} | {m['new_lines_hidden']} of {m['new_lines']} | "
                   f"{m['changed_reached']} / {m['changed_sent']} | {m['added_ms_p50']:.1f} / {m['added_ms_p99']:.1f} | "
                   f"{'yes' if m['recall_exact'] else 'NO'} |")
    return "\n".join(out)


# ------------------------------------------------------- the budget scenario

# The agent reads BUDGET_FILES outputs of ~12 KB each (~120,000 tokens at
# the upstream's honest 4 bytes a token), far more than the window it is
# given (Claude Code: CLAUDE_CODE_AUTO_COMPACT_WINDOW, so it compacts at
# 100,000 - 20,000 - 13,000 = 67,000; Codex: model_auto_compact_token_limit
# = 67,000), then recalls the very first output by its `§id`.
BUDGET_FILES = 40
BUDGET = 50000
BUDGET_WINDOW = "100000"
BUDGET_TASK = "Read the output files one by one"


def budget_files(w):
    for k in range(BUDGET_FILES):
        lines = ["%02d-%04d the measurement of sample %d returned %d within tolerance %d\n" % (k, i, k * 1000 + i, (k * 7919 + i * 104729) % 100003, i % 7)
                 for i in range(165)]
        (w / ("out_%02d.txt" % k)).write_text("".join(lines))


def budget_run(lam, bins, root, encoder, agent, with_lam, per_token=4.0, script=None, lam_args=(), name=None):
    """One run of the budget script by `agent` (claude-code, codex, gemini, opencode),
    through `lam run --budget` or straight to the upstream; the upstream
    reports honest usage, counting `per_token` bytes a token, and answers
    the agent's own compaction. `script`, `lam_args` (more flags of `lam
    run`) and `name`: another scenario's (the cold-cache one)."""
    w = root / "work"
    w.mkdir(parents=True)
    budget_files(w)
    if script is None:
        script = [("shell", "cat out_%02d.txt" % k) for k in range(BUDGET_FILES)] + ([("recall", None)] if with_lam else [])
    up = su.Upstream(str(w), record=str(root / "upstream.jsonl"), script=script, honest=per_token).start()
    env = agent_env(root)
    argv, api = budget_agent(agent, bins, env, None if with_lam else up.url)
    store = root / "store"
    if with_lam:
        cmd = [lam, "run", "--log", "--encoder", encoder, "--store", str(store), "--upstream", up.url, "--budget", str(BUDGET), *lam_args, "--", *argv]
    else:
        cmd = argv
    try:
        rc, out, err = run_bounded(cmd, w, env, 600)
    finally:
        up.shutdown()
    name = name or agent + (("-budget" if per_token == 4.0 else "-budget-dense") if with_lam else "-direct")
    return {"name": name, "api": api, "per_token": per_token, "scripts": [script], "rc": rc,
            "stdout": out, "stderr": err, "seen": list(up.seen), "store": str(store), "work": w}


def budget_agent(agent, bins, env, direct):
    """(argv, api) of `agent` in the budget scenario, each made to compact
    its own context at 67,000 tokens; `direct`: the upstream's URL when the
    agent is pointed straight at it (no lam), set up as the user would."""
    if agent == "claude-code":
        # The window Claude Code compacts in: it compacts at 100,000 - 20,000 - 13,000 = 67,000.
        env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = BUDGET_WINDOW
        if direct:
            env["ANTHROPIC_BASE_URL"] = direct
        return [str(bins / "claude"), "-p", BUDGET_TASK, "--allowedTools", "Bash,mcp__lam__recall"], "messages"
    if agent == "codex":
        # Codex compacts at this many tokens (the setting can lower its limit, not raise it).
        via = ["-c", 'openai_base_url="%s/v1"' % direct] if direct else []
        return [str(bins / "codex"), *via, "exec", "--skip-git-repo-check", "-c", "model_auto_compact_token_limit=67000", BUDGET_TASK], "responses"
    if agent == "gemini":
        # Gemini CLI compresses its history when the upstream's count passes
        # compressionThreshold x 1,048,576, but only at a user message that
        # is not a tool result: never inside one `-p` turn. There it masks
        # older tool outputs instead (`<tool_output_masked>`), once its own
        # estimate of them passes 50,000 + 30,000 tokens, whatever the
        # upstream counts: the 40 outputs here (~115,000) pass it.
        settings = {}
        if direct:
            env["GOOGLE_GEMINI_BASE_URL"] = direct
            settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}
        gemini_settings(env, settings)
        return [str(bins / "gemini"), "-p", BUDGET_TASK, "--yolo", "--skip-trust"], "gemini"
    # opencode compacts at the model's limit.input - min(20,000, max output) = 67,000.
    anthropic = {"models": {OPENCODE_MODEL: {"limit": {"context": 200000, "input": 87000, "output": 64000}}}}
    if direct:
        anthropic["options"] = {"baseURL": direct + "/v1"}
    opencode_config(env, {"provider": {"anthropic": anthropic}})
    return [str(bins / "opencode"), "run", "--auto", BUDGET_TASK], "messages"


def own_compaction(run, body):
    """Whether a request is (or follows) the agent's own compaction."""
    b = json.loads(body)
    kind = {"messages": su.compaction_kind, "responses": su.responses_compaction_kind, "gemini": su.gemini_compaction_kind}[run["api"]]
    return kind(b) is not None


def budget_measure(lam, run):
    # The agent's conversation (not a title or quota probe, which offers no tools).
    # (Gemini CLI's compression requests offer none, and count.)
    reqs = [e for e in model_requests(run) if offers_tools(run, e["body"]) or e.get("compaction")]
    first_seen, prefix_changes, prev = {}, 0, None
    for e in reqs:
        items = conversation(run, e["body"])
        for cid, texts in tool_results(run, items):
            first_seen.setdefault(cid, texts)
        # A change of the forwarded prefix (a cut); the agent's own compaction starts anew.
        raw = None if own_compaction(run, e["body"]) else raw_conversation(run, e["body"])
        if prev is not None and raw is not None and raw[:len(prev)] != prev:
            prefix_changes += 1
        prev = raw
    usage = [e["usage"] for e in reqs]
    # Gemini CLI's tool-output masking, the requests in which it masked more outputs.
    masked = [e.get("masked", 0) for e in reqs]
    maskings = sum(1 for a, b in zip([0] + masked, masked) if b > a)
    bytes_per_token = run["per_token"]
    firsts = list(first_seen.values())
    call, rid = recall_call(run, conversation(run, reqs[-1]["body"]))
    got = dict(tool_results(run, conversation(run, reqs[-1]["body"]))).get(call, [])
    # The first output, as the file holds it and as the agent sent it (Gemini CLI wraps its shell's).
    first_output = (run["work"] / "out_00.txt").read_text()
    new, hidden = hidden_lines(lam, run, [x for t in firsts for x in t]) if rid else (0, [])
    lam_says = BUDGET_LINE.search(run["stderr"])
    cuts, citations, lam_peak, _, _, factor = lam_says.groups() if lam_says else (0, 0, 0, 0, 0, "-")
    return {"agent": run["name"], "exit": run["rc"], "requests": len(reqs), "done": "DONE." in run["stdout"],
            "lam_cuts": int(cuts), "citations": int(citations), "lam_peak": int(lam_peak), "calibration": factor,
            "tool_outputs": int(sum(len((run["work"] / ("out_%02d.txt" % k)).read_bytes()) for k in range(run.get("files", BUDGET_FILES))) / bytes_per_token),
            "peak_usage": max(usage), "over_budget": sum(1 for u in usage if u > BUDGET), "prefix_changes": prefix_changes,
            "compactions": sum(1 for e in reqs if e.get("compaction")) + maskings, "maskings": maskings, "recall_id": rid,
            "recall_exact": any(unwrap(t).rstrip("\n") == x.rstrip("\n") for t in got for x in [first_output, *firsts[0]]) if firsts else False,
            "new_lines": new, "new_lines_hidden": len(hidden)}


def budget_check(m, direct):
    """`m`: a run through `lam run --budget`; `direct`: the run without lam."""
    what = f"{m['agent']}: "
    assert m["exit"] == 0 and m["done"], what + f"exit {m['exit']}, done {m['done']}"
    assert m["over_budget"] == 0, what + f"{m['over_budget']} of {m['requests']} requests over {BUDGET} tokens on the upstream's count (peak {m['peak_usage']})"
    assert m["compactions"] == 0, what + f"{m['compactions']} compactions of the agent's own reached the upstream" \
        + (f" ({m['maskings']} of them Gemini CLI's masking of older tool outputs, which its own estimate of them sets off, not the upstream's count)"
           if m.get("maskings") else "")
    assert m["prefix_changes"] >= 1 and m["prefix_changes"] == m["lam_cuts"], what + f"{m['prefix_changes']} prefix changes upstream, lam counted {m['lam_cuts']} cuts"
    assert m["recall_exact"], what + f"recall of §{m['recall_id']} did not return the first output's exact bytes"
    assert m["new_lines"] > 0 and m["new_lines_hidden"] == 0, what + f"{m['new_lines_hidden']} of {m['new_lines']} new lines withheld"
    assert direct["exit"] == 0 and direct["compactions"] >= 1, \
        f"{direct.get('agent', 'direct')}: exit {direct['exit']}, {direct['compactions']} compactions: the scenario must make the agent compact on its own"


def budget_table(rows):
    out = ["| run | requests | tool output (tokens) | peak input (upstream / lam) | requests over budget | cuts (citations) | calibration "
           "| agent's own compactions | recall of the first output |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in rows:
        lam_run = "budget" in m["agent"]
        rec = ("exact" if m["recall_exact"] else "NO") if lam_run else "-"
        over = m["over_budget"] if lam_run else "(no budget)"
        peak = f"{m['peak_usage']:,} / {m['lam_peak']:,}" if m["lam_peak"] else f"{m['peak_usage']:,}"
        cold = f", {m['cuts_cold']} cold" if m.get("cuts_cold") is not None else ""
        out.append(f"| {m['agent']} | {m['requests']} | {m['tool_outputs']:,} | {peak} | {over} | {m['prefix_changes']} ({m['citations']}){cold} | {m['calibration']} "
                   f"| {m['compactions']} | {rec} |")
    return "\n".join(out)


def budget_scenario(lam, bins, work, encoder, agent):
    """The budget scenario for `agent` through lam (an upstream that counts
    4 bytes a token and, for Claude Code, a denser one, 3, that counts more
    than lam does: the calibration keeps it under the budget too) and
    without lam: (rows, failure or None)."""
    rows = []
    runs = [(True, 4.0)] + ([(True, 3.0)] if agent == "claude-code" else []) + [(False, 4.0)]
    for with_lam, per_token in runs:
        root = Path(tempfile.mkdtemp(prefix="budget-", dir=work))
        run = budget_run(lam, bins, root, encoder, agent, with_lam, per_token)
        try:
            rows.append(budget_measure(lam, run))
        except Exception as e:  # noqa: BLE001 - the run's output says why
            return rows, f"FAIL {run['name']}: {e!r}\n{traceback.format_exc()}\n{run['stderr'][-3000:]}\n{run['stdout'][-1000:]}"
    try:
        for m in rows[:-1]:
            budget_check(m, rows[-1])
        if agent == "claude-code":
            assert float(rows[1]["calibration"]) > 1.0, f"claude-code-budget-dense: calibration {rows[1]['calibration']}, the upstream counts more than lam"
    except AssertionError as e:
        return rows, f"FAIL {e}"
    return rows, None


# ------------------------------------------- the budget across a cold cache

# The same reads through `lam run --budget 50000 --cache-ttl COLD_TTL`
# (target: half the budget), the step COLD_AT's command sleeping COLD_GAP
# seconds first: the next model request comes more than the TTL after the
# one before, finds the provider's cache cold, and is cut down to the
# target although its input is under the budget (a warm cut waits for the
# budget). COLD_FILES outputs (~72,000 tokens on the upstream's count) are
# more than the window the agent compacts in (67,000), so later the warm
# cuts keep it under the budget too.
COLD_TTL = 3
COLD_GAP = 6
COLD_AT = 9
COLD_FILES = 24
COLD = re.compile(r"\((\d+) cold, (\d+) warm\)")


def cold_script():
    step = lambda k: ("shell", ("sleep %d && " % COLD_GAP if k == COLD_AT else "") + "cat out_%02d.txt" % k)
    return [step(k) for k in range(COLD_FILES)] + [("recall", None)]


def cold_measure(lam, run):
    """budget_measure's figures, and across the gap: the seconds between the
    requests before and after it (`gap_s`), whether the one after it changed
    the forwarded prefix (`gap_cut`), the upstream's count of the one before
    (`before_gap`), and `lam run`'s count of cold cuts (`cuts_cold`, from
    its summary's budget line, `N cuts (C cold, W warm)`; None where it
    does not say)."""
    m = budget_measure(lam, run)
    reqs = [e for e in model_requests(run) if offers_tools(run, e["body"]) and not own_compaction(run, e["body"])]
    k = lambda e: len(tool_results(run, conversation(run, e["body"])))
    after = next(i for i, e in enumerate(reqs) if k(e) == COLD_AT + 1)
    before = max(i for i, e in enumerate(reqs[:after]) if k(e) == COLD_AT)
    prev, raw = raw_conversation(run, reqs[before]["body"]), raw_conversation(run, reqs[after]["body"])
    cold = COLD.search(run["stderr"][run["stderr"].find("lam run: `"):])
    m.update(gap_s=reqs[after]["at"] - reqs[before]["at"], gap_cut=raw[:len(prev)] != prev, before_gap=reqs[before]["usage"],
             cuts_cold=int(cold.group(1)) if cold else None, cuts_warm=int(cold.group(2)) if cold else None)
    return m


def cold_check(m):
    what = f"{m['agent']}: "
    budget_check(m, {"exit": 0, "compactions": 1})  # the agent compacts without lam: the -direct runs
    assert m["gap_s"] > COLD_TTL, what + f"the requests around the gap came {m['gap_s']:.1f} s apart, the TTL is {COLD_TTL} s"
    assert m["before_gap"] < BUDGET, what + f"the request before the gap was already over the budget ({m['before_gap']}): a cut after it need not be cold"
    assert m["gap_cut"], what + f"the first request after a {m['gap_s']:.1f} s gap (TTL {COLD_TTL} s) was not cut, its input under the budget but above the target"
    assert m["cuts_cold"] is not None, what + "lam run's summary does not say how many cuts were cold"
    assert m["cuts_cold"] >= 1, what + f"lam run counted {m['cuts_cold']} cold cuts"


def cold_scenario(lam, bins, work, encoder, agent):
    root = Path(tempfile.mkdtemp(prefix="budget-cold-", dir=work))
    run = budget_run(lam, bins, root, encoder, agent, True, script=cold_script(), lam_args=["--cache-ttl", str(COLD_TTL)], name=agent + "-budget-cold")
    run["files"] = COLD_FILES
    try:
        m = cold_measure(lam, run)
        cold_check(m)
    except Exception as e:  # noqa: BLE001 - the run's output says why
        return None, f"FAIL {run['name']}: {e!r}\n{traceback.format_exc()}\n{run['stderr'][-3000:]}\n{run['stdout'][-1000:]}"
    return m, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lam")
    ap.add_argument("agents_dir")
    ap.add_argument("work")
    ap.add_argument("report")
    ap.add_argument("--encoder", default="hashing")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    a.lam = os.path.abspath(a.lam)
    bins = Path(a.agents_dir).resolve() / "node_modules" / ".bin"
    missing = [p for p in ("claude", "codex", "gemini", "opencode") if not (bins / p).exists()]
    if len(missing) == 4:
        print(f"SKIPPED: real-agent tests: no agent is installed in {a.agents_dir} "
              "(scripts/install-agents.sh installs them from npm; the npm registry was unreachable?)")
        return 0
    rows, failures = [], []

    def wanted(name):
        """Whether to run `name`: asked for (--only), and its agent installed (else say why not)."""
        if a.only and name not in a.only.split(","):
            return False
        if needs(name) in missing:
            print(f"SKIPPED: {name}: `{needs(name)}` is not installed in {a.agents_dir} (scripts/install-agents.sh; the npm registry was unreachable?)", flush=True)
            return False
        return True

    for name, spec in agents(bins).items():
        if not wanted(name):
            continue
        t0 = time.monotonic()
        root = Path(tempfile.mkdtemp(prefix=name + "-", dir=a.work))
        run = run_agent(a.lam, name, spec, root, a.encoder)
        try:
            m = measure(a.lam, run)
            rows.append(m)
            check(m, run)
            print(f"ok: {name}: {m['requests']} requests, {m['conversations']} conversations = {m['proxy_sessions']} proxy sessions, admitted {m['admitted']} = sent {m['sent_texts']}, "
                  f"tokens {m['tokens_in']} -> {m['tokens_out']}, 0 earlier bytes changed, recall §{m['recall_id']} exact, {time.monotonic() - t0:.0f} s"
                  + (f", fork: {m['fork_shared_items']} shared history items ({m['fork_shared_stubs']} stubs) forwarded the same to both branches" if m["fork_shared_items"] else ""), flush=True)
        except AssertionError as e:
            failures.append(f"FAIL {e}")
            print(f"FAIL {e}", flush=True)
        except Exception as e:  # noqa: BLE001 - a run the measures cannot read fails, the others go on
            failures.append(f"FAIL {name}: {e!r}\n{traceback.format_exc()}\n{run['stderr'][-3000:]}")
            print(failures[-1], flush=True)
    budget_rows = []
    for agent in ("claude-code", "codex", "gemini", "opencode"):
        if not wanted(agent + "-budget"):
            continue
        t0 = time.monotonic()
        rows_of, failure = budget_scenario(a.lam, bins, a.work, a.encoder, agent)
        budget_rows += rows_of
        if failure:
            failures.append(failure)
            print(failure, flush=True)
            continue
        for m in rows_of[:-1]:
            print(f"ok: {m['agent']}: {m['requests']} requests, 0 over {BUDGET} tokens on the upstream's count (calibration x{m['calibration']}), "
                  f"{m['prefix_changes']} cuts, 0 compactions (direct: {rows_of[-1]['compactions']}), recall §{m['recall_id']} exact "
                  f"({time.monotonic() - t0:.0f} s with the direct run)", flush=True)
    for agent in ("claude-code", "codex"):
        if not wanted(agent + "-budget-cold"):
            continue
        m, failure = cold_scenario(a.lam, bins, a.work, a.encoder, agent)
        if failure:
            failures.append(failure)
            print(failure, flush=True)
            continue
        budget_rows.append(m)
        cold = "?" if m["cuts_cold"] is None else m["cuts_cold"]
        print(f"ok: {m['agent']}: {m['requests']} requests, a {m['gap_s']:.1f} s gap (--cache-ttl {COLD_TTL}) at {m['before_gap']} tokens (under {BUDGET}): "
              f"the next request cut; {m['prefix_changes']} cuts ({cold} cold), 0 over, 0 compactions, recall §{m['recall_id']} exact, "
              f"0 of {m['new_lines']} new lines hidden", flush=True)
    Path(a.report).write_text(json.dumps({"encoder": a.encoder, "agents": rows, "budget": budget_rows}, indent=2, default=str))
    print(table(rows))
    if budget_rows:
        print()
        print(budget_table(budget_rows))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
