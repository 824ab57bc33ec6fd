"""Session.admit over read_trajectory records gives the residual bytes and
digests of `lam compact` on the same file, for every reader format."""

import base64
import hashlib
import json
import subprocess

import pytest

import lam
from conftest import EXAMPLES, bert_model

# One trajectory per corpus folder (the smallest, so the run stays short),
# plus the repository's own session in the two formats the corpus lacks.
CORPUS_GLOBS = [
    "mini-swe-agent-gemini3pro-swebench-verified/trajs/*.traj.json.gz",
    "coder-swebench-lite/trajs/*.traj.gz",
    "sweagent-java-multi-swe-bench/*/trajs/*.traj.gz",
    "swe-agent-demos/**/*.traj",
]
EXAMPLE_FILES = ["edit-session.jsonl", "edit-session.openai.json"]
ALL_FORMATS = {"mini-swe-agent", "swe-agent", "openai-chat", "lam-jsonl"}


def smallest(corpus, pattern):
    files = sorted(corpus.glob(pattern), key=lambda p: (p.stat().st_size, str(p)))
    assert files, f"no {pattern} under {corpus}"
    return files[0]


def cases(corpus):
    return [smallest(corpus, g) for g in CORPUS_GLOBS] + [EXAMPLES / f for f in EXAMPLE_FILES]


def lam_compact(program, path, encoder, out):
    cmd = [str(program), "compact", "--encoder", encoder, "--no-cache", "--json", "--out", str(out), str(path)]
    res = subprocess.run(cmd, capture_output=True, check=True)
    reports = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    residuals = {}
    for r in reports:
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in r["session"])
        rows = [json.loads(line) for line in (out / f"{stem}.residual.jsonl").read_bytes().splitlines()]
        residuals[r["session"]] = [
            row["observation"].encode() if "observation" in row else base64.b64decode(row["observation_b64"]) for row in rows
        ]
    return {r["session"]: r for r in reports}, residuals


def residual_digest(residuals):
    h = hashlib.sha256()
    for r in residuals:
        h.update(r)
        h.update(b"\x1e")
    return h.hexdigest()[:16]


def check_parity(program, path, encoder, tmp_path, **session_args):
    reports, want = lam_compact(program, path, encoder, tmp_path)
    trajs = lam.read_trajectories(path)
    assert {t.session for t in trajs} == set(reports), path
    for t in trajs:
        s = lam.Session(encoder=encoder, cache=False, **session_args)
        adms = [s.admit(r.action, r.observation, r.returncode) for r in t.records]
        got = [a.residual_bytes for a in adms]
        rep = reports[t.session]
        assert len(got) == rep["records"] == len(want[t.session])
        for i, (g, w) in enumerate(zip(got, want[t.session])):
            assert g == w, f"{path} record {i}: residual differs"
        assert s.digest == rep["digest"], path
        assert residual_digest(got) == rep["residual_digest"], path
        assert s.delta_hat == rep["delta_hat"]
        assert sum(a.tokens_in for a in adms) == rep["tokens_in"]
        assert sum(a.tokens_out for a in adms) == rep["tokens_out"]
        assert sum(len(a.stubs) for a in adms) == rep["stubs"]
        st = s.stats()
        assert st["chunks"] == rep["chunks"] and st["chunks_dropped"] == rep["chunks_dropped"]
    return {t.format for t in trajs}, sum(len(t.records) for t in trajs)


def test_parity_every_format_hashing(corpus, lam_program, tmp_path):
    formats = set()
    for i, path in enumerate(cases(corpus)):
        out = tmp_path / str(i)
        out.mkdir()
        f, n = check_parity(lam_program, path, "hashing", out)
        assert n > 0, path
        formats |= f
    assert formats == ALL_FORMATS


def test_parity_with_a_store_and_l0_first(lam_program, tmp_path):
    # Archiving first changes nothing the model sees; the l0-l1 order is covered too.
    path = EXAMPLES / "edit-session.jsonl"
    reports, want = lam_compact(lam_program, path, "hashing", tmp_path)
    (t,) = lam.read_trajectories(path)
    s = lam.Session(encoder="hashing", cache=False, store=str(tmp_path / "arc"), session=t.session)
    got = [s.admit(r.action, r.observation, r.returncode).residual_bytes for r in t.records]
    assert got == want[t.session] and s.digest == reports[t.session]["digest"]
    s.close()
    for r, a_id in zip(t.records, s.ids):
        assert lam.Store(str(tmp_path / "arc")).recall(a_id) == r.observation
    o = lam.Session(encoder="hashing", cache=False, order="l0-l1")
    for r in t.records:
        o.admit(r.action, r.observation)
    res = subprocess.run(
        [str(lam_program), "compact", "--encoder", "hashing", "--no-cache", "--json", "--order", "l0-l1", str(path)],
        capture_output=True,
        check=True,
    )
    assert o.digest == json.loads(res.stdout.splitlines()[0])["digest"]


@pytest.mark.skipif(not (bert_model() / "model.safetensors").is_file(), reason="BERT model not installed (scripts/install-model.sh)")
def test_parity_bert(lam_program, tmp_path):
    formats, n = check_parity(lam_program, EXAMPLES / "edit-session.jsonl", "bert", tmp_path)
    assert formats == {"lam-jsonl"} and n > 0
