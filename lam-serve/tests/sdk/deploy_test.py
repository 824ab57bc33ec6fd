"""Three `lam serve` replicas behind a real load balancer (HAProxy from the
distribution's packages, round robin, no affinity), all on one PostgreSQL
store and one shared embedding cache (`--cache postgres://...`).

With the official SDK clients, real trajectories go through every API
(chat completions, messages, responses; streaming every other turn), first
through one replica alone (on a folder store, no cache: the reference),
then through the load balancer, which hands each request to the next
replica. Checked:

- every replica served requests (the balancer rotated them);
- the bytes each replica forwarded are the reference's, request for
  request, and no earlier item changed from one turn to the next although
  consecutive turns landed on different replicas;
- every `§id` cited in what was forwarded recalls its original exactly
  from the shared store (`lam recall --store postgres://...`, which any
  host can run), whichever replica archived it;
- a replica killed with SIGKILL in the middle of a stream: every `§id` the
  request it was streaming had cited upstream recalls exactly (nothing it
  acknowledged is lost), it restarts on the same port, and the client's
  retry, through the balancer, forwards the same bytes.

usage: deploy_test.py LAM CORPUS WORK [--encoder bert|hashing]
Needs LAM_TEST_PG_URL (scripts/test-postgres.sh --with) and `haproxy`.
"""

import argparse
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
from raw_json import raw_items

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


def replicas(args, upstream, pg, work, ports=None):
    return [sdk.Serve(args.lam, upstream, pg, args.encoder, port=ports[i] if ports else None, log=work / f"replica{i}.log", cache=pg)
            for i in range(REPLICAS)]


def check_rotation(reps, n):
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
        assert sdk.recall(args.lam, pg, sid) in [s["obs"] for s in t["steps"]], f"§{sid}, cited before the kill, is lost"
    reps[0] = sdk.Serve(args.lam, sdk_upstream(stub), pg, args.encoder, port=victim.port, log=work / "replica0.log", cache=pg)
    m = len(stub.seen)
    with httpx.Client(timeout=30) as c:
        r = c.post(lb.url + "/v1/messages", json=request_body(t, k, tag), headers={"x-api-key": "sk-ant-test"})
        r.raise_for_status()
    retried = stub.seen[m][2]
    assert retried == killed, "the retry forwarded other bytes than the killed attempt"
    print(f"  SIGKILL mid-stream: {len(cited)} §ids the killed request cited all recall exactly; restarted on port {victim.port}; "
          f"the retry through the balancer forwarded the same {len(retried)} bytes")


def sdk_upstream(stub):
    return f"http://127.0.0.1:{stub.server_address[1]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lam")
    ap.add_argument("corpus")
    ap.add_argument("work")
    ap.add_argument("--encoder", default="hashing")
    ap.add_argument("--trajectories", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    pg = os.environ["LAM_TEST_PG_URL"]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    trajectories = sdk.load_trajectories(args.corpus, args.trajectories, args.steps)
    stub = sdk.Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    up = sdk_upstream(stub)

    print(f"reference: {len(trajectories)} trajectories x 3 APIs through one lam serve (folder store, no cache), --encoder {args.encoder}")
    ref = sdk.Serve(args.lam, up, work / "ref-store", args.encoder)
    sdk.replay(args, ref, stub, trajectories)
    ref.stop()
    want = bodies(stub)
    stub.seen.clear()

    print(f"the same through HAProxy (round robin) over {REPLICAS} replicas on one PostgreSQL store and embedding cache")
    reps = replicas(args, up, pg, work)
    lb = Balancer([r.port for r in reps], work)
    try:
        convs = sdk.replay(args, lb, stub, trajectories)
        check_rotation(reps, len(want))
        got = bodies(stub)
        assert len(got) == len(want), f"{len(got)} requests forwarded, the reference forwarded {len(want)}"
        differ = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
        assert not differ, f"{len(differ)} of {len(want)} requests forwarded other bytes than one replica alone (first: request {differ[0]})"
        print(f"  {len(got)} requests: every forwarded body byte-identical to one replica's; 0 earlier items changed across replicas")
        sdk.check_recall(args.lam, pg, convs)
        check_kill(args, reps, lb, stub, pg, trajectories[0], work)
    finally:
        lb.stop()
        for r in reps:
            if r.p.poll() is None:
                r.stop()
    print("deployment tests passed")


if __name__ == "__main__":
    main()
