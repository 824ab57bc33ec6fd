"""One `lam serve` against three behind HAProxy (round robin, no affinity),
on one PostgreSQL, without an embedding cache (cold) and with the shared
one already filled (warm): throughput and the latency each request sees,
p50/p99, on real Claude Code and Codex traffic (`lam replay
--requests-out`, the sessions sent side by side, each in order), and what
rebuilding a conversation costs a replica that has seen none of it. A
benchmark, not a test: it prints a table (docs/deploy.md).

usage: bench_replicas.py LAM WORK --transcripts PATH... [--per-session N] [--encoder bert|hashing]
Needs LAM_TEST_PG_URL (scripts/test-postgres.sh --with) and `haproxy`.
"""

import argparse
import itertools
import os
import statistics
import threading
import time
from pathlib import Path

import deploy_test as dt
import httpx
import sdk_test as sdk


def timed(url, reqs):
    """Send each session's requests in order, the sessions side by side;
    (wall seconds, per-request ms)."""
    by = {}
    for r in reqs:
        by.setdefault(r[0], []).append(r)
    ms, lock = [], threading.Lock()

    def one(session_reqs):
        with httpx.Client(timeout=300) as c:
            for _, agent, path, body in session_reqs:
                t = time.perf_counter()
                r = c.post(url + path, content=body, headers=dt.HEADERS[agent])
                r.raise_for_status()
                with lock:
                    ms.append((time.perf_counter() - t) * 1e3)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(s,)) for s in by.values()]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return time.perf_counter() - t0, ms


def p99(xs):
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))]


RUNS = itertools.count(1)


def setup(args, up, pg, work, n, cache):
    # The replicas are one run (`--run`), as docs/deploy.md sets them up; each
    # set-up a new one, so that no pass finds another's archive.
    run = f"bench-{next(RUNS)}-{os.getpid()}"
    reps = [sdk.Serve(args.lam, up, pg, args.encoder, extra=["--run", run], log=work / f"bench{i}.log", cache=pg if cache else None) for i in range(n)]
    lb = dt.Balancer([r.port for r in reps], work) if n > 1 else None
    return reps, lb


def teardown(reps, lb):
    if lb:
        lb.stop()
    for r in reps:
        r.stop()


def run(args, up, pg, work, reqs, n, cache):
    reps, lb = setup(args, up, pg, work, n, cache)
    try:
        wall, ms = timed(lb.url if lb else reps[0].url, reqs)
    finally:
        teardown(reps, lb)
    return wall, ms


def rebuild(args, up, pg, work, reqs, cache):
    """The last request of each session, each to a replica that has seen none of it."""
    last = {}
    for r in reqs:
        last[r[0]] = r
    out = []
    for r in last.values():
        reps, lb = setup(args, up, pg, work, 1, cache)
        try:
            out += timed(reps[0].url, [r])[1]
        finally:
            teardown(reps, lb)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lam")
    ap.add_argument("work")
    ap.add_argument("--transcripts", nargs="+", required=True)
    ap.add_argument("--per-session", type=int, default=40)
    ap.add_argument("--encoder", default="bert")
    args = ap.parse_args()
    pg, work = os.environ["LAM_TEST_PG_URL"], Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    reqs = dt.agent_requests(args, work)
    stub = sdk.Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    up = dt.sdk_upstream(stub)
    print(f"{len(reqs)} requests of {len(set(r[0] for r in reqs))} sessions, sent side by side; lam serve --encoder {args.encoder}")
    print("| replicas | embedding cache | requests/s | latency p50 ms | p99 ms |")
    print("|---:|---|---:|---:|---:|")
    rows = [(1, False, "none (cold)"), (3, False, "none (cold)")]
    for n, cache, label in rows:
        wall, ms = run(args, up, pg, work, reqs, n, cache)
        print(f"| {n} | {label} | {len(ms) / wall:.1f} | {statistics.median(ms):.1f} | {p99(ms):.1f} |", flush=True)
    run(args, up, pg, work, reqs, 1, True)  # fills the shared cache
    for n in (1, 3):
        wall, ms = run(args, up, pg, work, reqs, n, True)
        print(f"| {n} | shared, warm | {len(ms) / wall:.1f} | {statistics.median(ms):.1f} | {p99(ms):.1f} |", flush=True)
    cold, warm = rebuild(args, up, pg, work, reqs, False), rebuild(args, up, pg, work, reqs, True)
    print(f"rebuild (a session's last request to a replica that has seen none of it), ms per session: "
          f"cold {', '.join(f'{x:.0f}' for x in cold)}; warm cache {', '.join(f'{x:.0f}' for x in warm)}")


if __name__ == "__main__":
    main()
