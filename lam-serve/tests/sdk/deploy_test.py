"""Three `lam serve` replicas behind a real load balancer (HAProxy from the
distribution's packages, round robin, no affinity), all on one PostgreSQL
store and one shared embedding cache (`--cache postgres://...`).

Two replays, each first through one replica alone (on a folder store, no
cache: the reference), then through the load balancer, which hands each
request to the next replica: real Claude Code and Codex transcripts (the
first requests of each session as the agent sends them, written by `lam
replay --requests-out`), and, with the official SDK clients, real
trajectories through every API (chat completions, messages, responses;
streaming every other turn). Checked:

- every replica served requests (the balancer rotated them);
- the bytes each replica forwarded are the reference's, request for
  request, and no earlier item changed from one turn to the next although
  consecutive turns landed on different replicas;
- the replicas are one run (`--run`): every conversation is archived in
  the run's store session, whichever replicas served it, with the
  observations, ids and order one replica alone gives; a fourth replica of
  the run with another threshold refuses to start;
- every `§id` cited in what was forwarded recalls its original exactly
  from the shared store (`lam recall --store postgres://...`, which any
  host can run), whichever replica archived it: the transcripts' by the id
  alone in the run's session (which every answer named, `x-lam-session`),
  the same bytes as from the reference's store, the trajectories' their
  originals;
- a replica killed with SIGKILL in the middle of a stream: every `§id` the
  request it was streaming had cited upstream recalls exactly (nothing it
  acknowledged is lost), it restarts on the same port, and the client's
  retry, through the balancer, forwards the same bytes.

usage: deploy_test.py LAM CORPUS WORK [--encoder bert|hashing] [--transcripts PATH...] [--per-session N]
Needs LAM_TEST_PG_URL (scripts/test-postgres.sh --with) and `haproxy`.
"""

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import sdk_test as sdk
from raw_json import identity, raw_items

REPLICAS = 3

HAPROXY = """global
    maxconn 512
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    # A new server connection per request, so that every request is balanced.
    option http-server-close
frontend lam
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
{servers}
"""


class Balancer:
    def __init__(self, ports, work):
        self.port = sdk.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        servers = "\n".join(f"    server r{i} 127.0.0.1:{p}" for i, p in enumerate(ports))
        cfg = work / "haproxy.cfg"
        cfg.write_text(HAPROXY.format(port=self.port, servers=servers))
        self.log = open(work / "haproxy.log", "w")
        self.p = subprocess.Popen(["haproxy", "-f", str(cfg), "-db"], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.p.poll() is not None:
                raise SystemExit(f"haproxy exited with {self.p.returncode}: see {self.log.name}")
            time.sleep(0.1)
        raise SystemExit("haproxy did not start")

    def stop(self):
        self.p.terminate()
        self.p.wait(30)


def bodies(stub):
    return [body for _, _, body in stub.seen]


def replicas(args, upstream, pg, work, run):
    """Three replicas of one run (`--run`) on the shared store and cache."""
    return [replica(args, upstream, pg, work, run, i) for i in range(REPLICAS)]


def replica(args, upstream, pg, work, run, i, port=None):
    return sdk.Serve(args.lam, upstream, pg, args.encoder, extra=["--run", run], port=port, log=work / f"replica{i}.log", cache=pg)


def check_settings_refused(args, upstream, pg, run):
    """A replica of `run` with another threshold does not start."""
    cmd = [args.lam, "serve", "--listen", f"127.0.0.1:{sdk.free_port()}", "--upstream", upstream, "--store", pg, "--encoder", args.encoder,
           "--no-cache", "--recall", "recall", "--run", run, "--threshold", "0.9"]
    r = subprocess.run(cmd, capture_output=True, timeout=300)
    err = r.stderr.decode()
    assert r.returncode != 0 and "other settings" in err and "threshold: 0.9" in err, f"a replica with other settings started: rc {r.returncode}\n{err}"
    said = next(l.strip() for l in err.splitlines() if "other settings" in l)
    print(f"  a fourth replica of run {run} with --threshold 0.9 refused to start: {said[:200]}...")


def check_admitted(servers):
    """No observation was forwarded verbatim because its admission failed
    (a failed admission is safe, so the bytes could agree without it)."""
    failed = [s["last_error"] for r in servers for s in r.stats()["sessions"] if s["admission_errors"]]
    assert not failed, f"{len(failed)} sessions forwarded observations verbatim after a failed admission; first: {failed[0]}"


def check_rotation(reps, n):
    check_admitted(reps)
    served = [sum(s["requests"] for s in r.stats()["sessions"]) for r in reps]
    assert all(k > 0 for k in served), f"requests per replica {served}: the balancer did not rotate"
    assert sum(served) == n, f"requests per replica {served}, {n} sent"
    print(f"  requests per replica: {served} (round robin, no affinity)")


def request_body(t, k, tag):
    items = sdk.conversation("messages", t, k, tag)
    return {"model": "stub", "max_tokens": 64, "system": t["system"], "messages": items, "tools": sdk.TOOLS["messages"], "stream": True}


def check_kill(args, reps, lb, stub, pg, t, work):
    """SIGKILL a replica mid-stream; restart it; the client retries through the balancer."""
    tag, k = "\n(kill test)", 6
    clients = sdk.make_clients(lb.url)
    for j in range(1, k):
        sdk.call(clients, "messages", t, j, stream=False, tag=tag)
    victim = reps[0]
    stub.gate.clear()
    n = len(stub.seen)
    with httpx.stream("POST", victim.url + "/v1/messages", json=request_body(t, k, tag), headers={"x-stub-gate": "1", "x-api-key": "sk-ant-test"},
                      timeout=30) as r:
        it = r.iter_raw()
        next(it)  # the first event: the request is forwarded and streaming
        victim.p.send_signal(signal.SIGKILL)
        victim.p.wait(30)
        try:
            b"".join(it)
            cut = False
        except httpx.HTTPError:
            cut = True
    stub.gate.set()
    assert cut, "the stream should break when its replica is killed"
    killed = stub.seen[n][2]
    cited = {c for it in raw_items(killed, "messages") for o in sdk.observations("messages", it) for c in sdk.CITED.findall(o)}
    assert cited, "the killed request cited no §id"
    for sid in cited:
        assert sdk.recall(args.lam, pg, sid, "deploy-sdk") in [s["obs"] for s in t["steps"]], f"§{sid}, cited before the kill, is lost"
    reps[0] = replica(args, sdk_upstream(stub), pg, work, "deploy-sdk", 0, port=victim.port)
    m = len(stub.seen)
    with httpx.Client(timeout=30) as c:
        r = c.post(lb.url + "/v1/messages", json=request_body(t, k, tag), headers={"x-api-key": "sk-ant-test"})
        r.raise_for_status()
    retried = stub.seen[m][2]
    assert retried == killed, "the retry forwarded other bytes than the killed attempt"
    print(f"  SIGKILL mid-stream: {len(cited)} §ids the killed request cited all recall exactly; restarted on port {victim.port}; "
          f"the retry through the balancer forwarded the same {len(retried)} bytes")


# ---------------------------------------------------------------- transcripts

HEADERS = {"claude-code": {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01", "content-type": "application/json"},
           "codex": {"authorization": "Bearer sk-test", "content-type": "application/json"}}


def agent_requests(args, work):
    """The first `--per-session` requests of each transcript session, as
    (session, agent, path, body bytes), in order."""
    out = work / "requests.jsonl"
    subprocess.run([args.lam, "replay", *args.transcripts, "--encoder", "hashing", "--no-cache", "--requests-out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    reqs, per = [], {}
    with open(out, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            per[r["session"]] = per.get(r["session"], 0) + 1
            if per[r["session"]] <= args.per_session:
                reqs.append((r["session"], r["agent"], r["path"], raw_body(line)))
    out.unlink()
    return reqs


def raw_body(line):
    """The member `body` of a `--requests-out` line, its bytes as written."""
    start = line.index('"body":') + len('"body":')
    _, end = json.JSONDecoder().raw_decode(line, start)
    return line[start:end].encode()


def send(url, reqs, stub):
    """Each request, in order: what the upstream got for each, and the
    store session each answer named (`x-lam-session`)."""
    got, named = [], []
    with httpx.Client(timeout=120) as c:
        for _, agent, path, body in reqs:
            n = len(stub.seen)
            r = c.post(url + path, content=body, headers=HEADERS[agent])
            assert r.status_code == 200, f"{path}: {r.status_code} {r.text[:300]}"
            got.append(stub.seen[n][2])
            named.append(r.headers.get("x-lam-session"))
    return got, named


def field(path):
    return "messages" if path.endswith("/messages") else "input"


def first_difference(reqs, got, want, i):
    """Where request `i` forwarded through the replicas differs from the reference."""
    session, _, path, _ = reqs[i]
    a, b = raw_items(got[i], field(path)), raw_items(want[i], field(path))
    k = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    show = lambda items: items[k][:1500] if k < len(items) else "(none)"
    return f"request {i} ({session}), item {k} of {len(a)} / {len(b)}:\n  replicas: {show(a)}\n  one replica: {show(b)}"


def check_prefixes(reqs, got):
    """Per session, every request forwards the earlier items as before,
    apart from what the client itself rewrites (`raw_json.identity`)."""
    prev = {}
    for (session, _, path, _), body in zip(reqs, got):
        items = [identity(x) for x in raw_items(body, field(path))]
        p = prev.get(session, [])
        assert items[:len(p)] == p, f"{session}: an earlier item changed on the wire"
        prev[session] = items


def recall_in(lam, store, session, sid):
    r = subprocess.run([lam, "recall", "--store", str(store), "--session", session, "§" + sid], capture_output=True)
    return r.stdout.decode() if r.returncode == 0 else None


def listing(lam, store, session=None):
    """`lam recall --list`: the store's sessions, or one session's ids in order."""
    cmd = [lam, "recall", "--store", str(store), "--list", *(["--session", session] if session else [])]
    return subprocess.run(cmd, capture_output=True, check=True).stdout.decode().splitlines()


def check_store_session(args, pg, ref_store, run):
    """Every conversation of the run archived in one store session, `RUN`,
    whichever replicas served it, with the observations, ids and order one
    replica alone gives (its run: `ref`): each observation once. Returns
    how many."""
    ours, theirs = listing(args.lam, pg, run), listing(args.lam, ref_store, "ref")
    assert ours == theirs, f"store session {run}: {len(ours)} observations, {len(theirs)} for one replica, or other ids"
    names = [l.split("\t")[0] for l in listing(args.lam, pg)]
    assert run in names and not [n for n in names if n.startswith((run + "-", run + "@"))], f"store sessions {names}"
    return len(ours)


def check_transcript_recall(args, pg, ref_store, run, reqs, got, named):
    """Every answer named the run's store session (`x-lam-session`), and
    every §id cited in a forwarded request recalls there, by the id alone,
    the reference's bytes. Returns (ids, ids that `lam recall` without a
    session finds in more than one observation of the whole shared store,
    other runs' included)."""
    assert set(named) == {run}, f"answers named store sessions {sorted(set(map(str, named)))}"
    ids = {c for (_, _, path, _), body in zip(reqs, got) for it in raw_items(body, field(path)) for c in sdk.CITED.findall(it)}
    assert ids, "no §id cited"
    for sid in sorted(ids):
        want = recall_in(args.lam, ref_store, "ref", sid)
        assert want is not None and recall_in(args.lam, pg, run, sid) == want, f"§{sid} in {run}: not the reference's bytes"
    ambiguous = sum(subprocess.run([args.lam, "recall", "--store", pg, "§" + s], capture_output=True).returncode != 0 for s in ids)
    return len(ids), ambiguous


def replay_transcripts(args, up, pg, stub, work):
    reqs = agent_requests(args, work)
    sessions = sorted({r[0] for r in reqs})
    print(f"reference: {len(reqs)} requests of {len(sessions)} Claude Code and Codex transcript sessions through one lam serve")
    ref_store = work / "ref-transcripts"
    ref = sdk.Serve(args.lam, up, ref_store, args.encoder, extra=["--run", "ref"])
    want, _ = send(ref.url, reqs, stub)
    check_admitted([ref])
    ref.stop()
    run = "deploy-transcripts"
    print(f"the same through HAProxy over {REPLICAS} replicas of run {run} on one PostgreSQL store and embedding cache")
    reps = replicas(args, up, pg, work, run)
    lb = Balancer([r.port for r in reps], work)
    try:
        got, named = send(lb.url, reqs, stub)
        check_rotation(reps, len(reqs))
        check_settings_refused(args, up, pg, run)
    finally:
        lb.stop()
        for r in reps:
            r.stop()
    differ = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert not differ, f"{len(differ)} of {len(want)} requests forwarded other bytes than one replica alone; first: " + first_difference(reqs, got, want, differ[0])
    check_prefixes(reqs, got)
    obs = check_store_session(args, pg, ref_store, run)
    n, ambiguous = check_transcript_recall(args, pg, ref_store, run, reqs, got, named)
    print(f"  {len(got)} requests: every forwarded body byte-identical to one replica's; 0 earlier items changed across replicas")
    print(f"  {len(sessions)} conversations in one store session, {run}: {obs} observations, each archived once, "
          f"under the ids and in the order one replica gives, whichever replica archived it")
    print(f"  {n} cited §ids: each recalls by its id alone in the run's session the reference's bytes; "
          f"store-wide (other runs' sessions too), {ambiguous} of them name more than one observation")


def sdk_upstream(stub):
    return f"http://127.0.0.1:{stub.server_address[1]}"


def main():
    ap = sdk.arguments()
    ap.add_argument("--transcripts", nargs="*", default=[])
    ap.add_argument("--per-session", type=int, default=40)
    args = ap.parse_args()
    pg = os.environ["LAM_TEST_PG_URL"]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    trajectories = sdk.load_trajectories(args.corpus, args.trajectories, args.steps)
    stub = sdk.Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    up = sdk_upstream(stub)
    if args.transcripts:
        replay_transcripts(args, up, pg, stub, work)
        stub.seen.clear()

    print(f"reference: {len(trajectories)} trajectories x 3 APIs through one lam serve (folder store, no cache), --encoder {args.encoder}")
    ref = sdk.Serve(args.lam, up, work / "ref-store", args.encoder)
    sdk.replay(args, ref, stub, trajectories)
    check_admitted([ref])
    ref.stop()
    want = bodies(stub)
    stub.seen.clear()

    print(f"the same through HAProxy (round robin) over {REPLICAS} replicas on one PostgreSQL store and embedding cache")
    reps = replicas(args, up, pg, work, "deploy-sdk")
    lb = Balancer([r.port for r in reps], work)
    try:
        convs = sdk.replay(args, lb, stub, trajectories)
        check_rotation(reps, len(want))
        got = bodies(stub)
        assert len(got) == len(want), f"{len(got)} requests forwarded, the reference forwarded {len(want)}"
        differ = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
        assert not differ, f"{len(differ)} of {len(want)} requests forwarded other bytes than one replica alone (first: request {differ[0]})"
        print(f"  {len(got)} requests: every forwarded body byte-identical to one replica's; 0 earlier items changed across replicas")
        sdk.check_recall_mcp(args.lam, pg, sdk.check_recall(args.lam, pg, convs, session="deploy-sdk"), proxy_run="deploy-sdk")
        check_kill(args, reps, lb, stub, pg, trajectories[0], work)
    finally:
        lb.stop()
        for r in reps:
            if r.p.poll() is None:
                r.stop()
    print("deployment tests passed")


if __name__ == "__main__":
    main()
