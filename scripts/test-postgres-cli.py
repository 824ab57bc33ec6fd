#!/usr/bin/env python3
"""The `lam` program against a PostgreSQL server (run by scripts/test-postgres.sh).

`lam compact --store postgres://...` archives trajectories (the example session,
which holds an observation that is not UTF-8, and two runs of one corpus task
by different models); then every observation is recalled byte-exact with
`lam recall --store postgres://...` and checked against the trajectory's own
bytes, `--list` is checked line by line, and the two runs stay two sessions.
Usage: test-postgres-cli.py LAM_BINARY POSTGRES_URL
"""
import base64, glob, gzip, hashlib, json, os, subprocess, sys

lam, url = sys.argv[1], sys.argv[2]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
corpus = os.environ.get("LAM_CORPUS", os.path.join(root, "..", "shared", "corpus"))


def run(*args, ok=True):
    p = subprocess.run([lam, *args], capture_output=True)
    if ok and p.returncode != 0:
        sys.exit(f"lam {' '.join(args)} failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
    return p


def example_records():
    recs = []
    for line in open(os.path.join(root, "examples", "edit-session.jsonl"), encoding="utf-8"):
        r = json.loads(line)
        obs = base64.b64decode(r["observation_b64"]) if "observation_b64" in r else r["observation"].encode()
        recs.append((r.get("action") or "", obs))
    return recs


def swe_records(path):
    # SWE-agent .traj: trajectory[].action / .observation (what lam-trajectory reads).
    steps = json.load(gzip.open(path))["trajectory"]
    return [((s.get("action") or "").strip(), (s.get("observation") or "").encode()) for s in steps]


def ids(recs, shown):
    """Visible ids as lam gives them (SHA-1 over action, 0x1F, observation): one id space
    for the observations of every session of the store (`shown`, full hex -> visible id,
    shared by the sessions archived so far): the id an observation already shows, else the
    shortest prefix, 4 hex or more, with which no other observation's id begins; fixed at
    first use."""
    out = []
    for action, obs in recs:
        full = hashlib.sha1(action.encode() + b"\x1f" + obs).hexdigest()
        if full not in shown:
            n = 4
            while n < 40 and any(f.startswith(full[:n]) for f in shown):
                n += 1
            shown[full] = full[:n]
        out.append((shown[full], obs))
    return out


example = os.path.join(root, "examples", "edit-session.jsonl")
runs = sorted(glob.glob(os.path.join(corpus, "sweagent-java-multi-swe-bench", "*", "trajs", "fasterxml__jackson-core-370.traj.gz")))[:2]
assert len(runs) == 2, f"two runs of jackson-core-370 under {corpus}"
out = run("compact", "--encoder", "hashing", "--no-cache", "--no-tokens", "--json", example, *runs, "--store", url)
sessions = [json.loads(l)["session"] for l in out.stdout.decode().splitlines()]
assert len(set(sessions)) == 3, sessions
space = {}
expect = {sessions[0]: ids(example_records(), space), sessions[1]: ids(swe_records(runs[0]), space), sessions[2]: ids(swe_records(runs[1]), space)}
non_utf8 = 0
recalled = 0
for s, recs in expect.items():
    listed = run("recall", "--store", url, "--session", s, "--list").stdout.decode().splitlines()
    uniq = list(dict(recs).items())
    assert len(listed) == len(uniq), (s, len(listed), len(uniq))
    for line, (i, obs) in zip(listed, uniq):
        f = line.split("\t")
        assert f[0] == "§" + i and f[1] == f"{len(obs)} bytes", (line, i, len(obs))
        got = run("recall", "--store", url, "--session", s, "§" + i).stdout
        assert got == obs, f"{s} §{i}: recall is not byte-exact"
        got = run("recall", "--store", url, "§" + i).stdout
        assert got == obs, f"§{i} of {s}: recall by the id alone is not byte-exact"
        recalled += 1
        try:
            obs.decode("utf-8")
        except UnicodeDecodeError:
            non_utf8 += 1
assert non_utf8 >= 1, "the example holds an observation that is not UTF-8"
listed = run("recall", "--store", url, "--list").stdout.decode()
assert all(s in listed for s in sessions), listed
bad = run("recall", "--store", url, "§0000000f", ok=False)
assert bad.returncode == 1 and b"nearest" in bad.stderr, bad.stderr
print(f"lam CLI on PostgreSQL: {len(sessions)} sessions, {recalled} observations recalled byte-exact ({non_utf8} not UTF-8), --list checked")

# The shared embedding cache (--cache postgres://...): a lam replay (the proxy's
# engine) writes every chunk it encodes to lam_embeddings; a second process reads them
# back and forwards the same bytes (the same removal and bill).
transcript = os.path.join(corpus, "agent-transcripts", "cctrace")
def totals(out):
    return [l for l in out.stdout.decode().splitlines() if l.startswith("In total") or l.startswith("(removal")]
psql = os.environ.get("LAM_TEST_PSQL")
count = lambda: int(subprocess.run([psql, url, "-tAc", "SELECT count(*) FROM lam_embeddings"], capture_output=True, check=True).stdout)
first = totals(run("replay", "--encoder", "hashing", "--cache", url, transcript))
rows = count() if psql else None
second = totals(run("replay", "--encoder", "hashing", "--cache", url, transcript))
assert first and first == second, (first, second)
if psql:
    assert rows > 0 and count() == rows, (rows, count())
print(f"lam replay with --cache postgres://: {rows} chunk embeddings shared, a second process forwarded the same bytes")

# The Python package on the same server (LAM_PYTHON: an interpreter with `lam` installed,
# as scripts/test-python.sh leaves in target/py-venv): lam.Store recalls what the CLI
# archived; lam.Session(store=postgres://...) archives, and the CLI recalls it.
py = os.environ.get("LAM_PYTHON")
if not py:
    print("lam.Store / lam.Session on PostgreSQL: not run (LAM_PYTHON unset)")
    sys.exit(0)
check = r'''
import json, sys, lam
url, expect = sys.argv[1], json.load(sys.stdin)
n = 0
for s, recs in expect.items():
    st = lam.Store(url, session=s)
    for i, hexobs in recs:
        assert st.recall("§" + i) == bytes.fromhex(hexobs), f"lam.Store {s} §{i} is not byte-exact"
        n += 1
with lam.Session(encoder="hashing", store=url, session="python-on-pg") as sess:
    ids = [sess.admit("cat f", b"line %d\n\xff not utf-8\n" % k).id for k in range(3)]
print(json.dumps({"recalled": n, "ids": ids}))
'''
payload = json.dumps({s: [[i, o.hex()] for i, o in dict(recs).items()] for s, recs in expect.items()})
p = subprocess.run([py, "-c", check, url], input=payload.encode(), capture_output=True)
if p.returncode != 0:
    sys.exit(f"lam (Python) on PostgreSQL failed: {p.stderr.decode(errors='replace')}")
res = json.loads(p.stdout)
for k, i in enumerate(res["ids"]):
    got = run("recall", "--store", url, "--session", "python-on-pg", i).stdout
    assert got == b"line %d\n\xff not utf-8\n" % k, f"{i} archived from Python does not recall exactly"
print(f"lam (Python) on PostgreSQL: lam.Store recalled {res['recalled']} observations byte-exact; "
      f"{len(res['ids'])} admitted by lam.Session recalled exactly by the CLI")
