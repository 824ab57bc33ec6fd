"""A long run on PostgreSQL, with a budget (issue 68, item 5): the time
a fresh conversation's requests take at the start of a run, after 3,000
and after 9,000 other requests of the run (each request of a budgeted run
records its terms in the run's ledger, which every request reads), and one
`lam serve` on a folder store, one on PostgreSQL and three behind HAProxy on
PostgreSQL (round robin) side by side, p50 and p99 per request. A benchmark,
not a test: it prints tables (docs/deploy.md).

The conversations are real Claude Code requests (`lam replay
--requests-out` of the transcripts given): the probe is the first session's
first --probe requests; the run is filled with the first three requests of
each session, again and again, each copy its own conversation (its first
text tagged), sent on four connections at once.

usage: bench_long_run.py LAM WORK --transcripts PATH... [--probe N] [--fill N] [--budget B]
Needs LAM_TEST_PG_URL (scripts/test-postgres.sh --with) and `haproxy`.
"""

import argparse
import os
import re
import statistics
import threading
import time
from pathlib import Path

import deploy_test as dt
import httpx
import sdk_test as sdk


def tagged(body, tag):
    """`body` as another conversation: its first text begins with `tag`."""
    text = body.decode()
    at = text.index('"text":"') + len('"text":"')
    return (text[:at] + tag + text[at:]).encode()


def probe(url, reqs, tag):
    """A fresh conversation (the probe's requests, tagged): ms per request."""
    ms = []
    with httpx.Client(timeout=300) as c:
        for _, agent, path, body in reqs:
            t = time.perf_counter()
            r = c.post(url + path, content=tagged(body, tag), headers=dt.HEADERS[agent])
            r.raise_for_status()
            ms.append((time.perf_counter() - t) * 1e3)
    return ms


def fill(url, seeds, start, n):
    """`n` more requests into the run: conversations of the seeds' requests,
    each tagged anew, on four connections at once."""
    per = len(seeds)
    convs = [start + k for k in range(n // per)]

    def one(mine):
        with httpx.Client(timeout=300) as c:
            for k in mine:
                for _, agent, path, body in seeds:
                    c.post(url + path, content=tagged(body, f"filler {k}: "), headers=dt.HEADERS[agent]).raise_for_status()

    threads = [threading.Thread(target=one, args=(convs[i::4],)) for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return len(convs) * per


def proxy_ms(log, n):
    """The proxy's own time for the last `n` requests in its `--log`
    (`... in X ms (headers sent)`: from the request's arrival to the
    answer's headers, the loopback upstream's answer included)."""
    text = Path(log).read_text(errors="replace")
    ms = [float(m) for m in re.findall(r" in ([0-9.]+) ms \(headers sent\)", text)]
    return ms[-n:]


def p99(xs):
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * 0.99))]


def long_run(args, up, pg, work, reqs):
    seeds = [r for r in reqs if r[0] == reqs[0][0]][:3]
    first = [r for r in reqs if r[0] == reqs[0][0]][: args.probe]
    s = sdk.Serve(args.lam, up, pg, args.encoder, extra=["--run", f"long-{os.getpid()}", "--budget", str(args.budget), "--log"], log=work / "long.log")
    print(f"long run: one lam serve --budget {args.budget} on PostgreSQL; a fresh conversation's {len(first)} requests "
          f"(a real Claude Code session's first), ms per request")
    print("| other requests of the run before it | client p50 | client p99 | lam serve p50 | lam serve p99 |")
    print("|---:|---:|---:|---:|---:|")
    done = 0
    try:
        for mark in sorted({0, min(3000, args.fill), args.fill}):
            done += fill(s.url, seeds, done, mark - done) if mark > done else 0
            ms = probe(s.url, first, f"probe after {done}: ")
            own = proxy_ms(work / "long.log", len(first))
            done += len(first)
            print(f"| {done - len(first)} | {statistics.median(ms):.2f} | {p99(ms):.2f} | {statistics.median(own):.2f} | {p99(own):.2f} |", flush=True)
    finally:
        s.stop()


def side_by_side(args, up, pg, work, reqs):
    print(f"one and three replicas, --budget {args.budget}: {len(reqs)} requests of {len(set(r[0] for r in reqs))} real sessions, "
          "the sessions side by side, each in order; ms per request")
    print("| set-up | p50 | p99 |")
    print("|---|---:|---:|")
    for label, n, store in (("one lam serve, folder store", 1, None), ("one lam serve, PostgreSQL", 1, pg), ("three behind HAProxy, PostgreSQL", 3, pg)):
        run = f"side-{n}-{os.getpid()}-{time.monotonic_ns()}"
        stores = [store or work / f"{run}-store" for _ in range(n)]
        reps = [sdk.Serve(args.lam, up, st, args.encoder, extra=["--run", run, "--budget", str(args.budget)], log=work / f"{run}-{i}.log")
                for i, st in enumerate(stores)]
        lb = dt.Balancer([r.port for r in reps], work) if n > 1 else None
        try:
            ms = timed(lb.url if lb else reps[0].url, reqs)
        finally:
            if lb:
                lb.stop()
            for r in reps:
                r.stop()
        print(f"| {label} | {statistics.median(ms):.2f} | {p99(ms):.2f} |", flush=True)


def timed(url, reqs):
    by = {}
    for r in reqs:
        by.setdefault(r[0], []).append(r)
    ms, lock = [], threading.Lock()

    def one(session_reqs):
        with httpx.Client(timeout=300) as c:
            for _, agent, path, body in session_reqs:
                t = time.perf_counter()
                c.post(url + path, content=body, headers=dt.HEADERS[agent]).raise_for_status()
                with lock:
                    ms.append((time.perf_counter() - t) * 1e3)

    threads = [threading.Thread(target=one, args=(s,)) for s in by.values()]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lam")
    ap.add_argument("work")
    ap.add_argument("--transcripts", nargs="+", required=True)
    ap.add_argument("--per-session", type=int, default=40)
    ap.add_argument("--probe", type=int, default=20)
    ap.add_argument("--fill", type=int, default=9000)
    ap.add_argument("--budget", type=int, default=100000)
    ap.add_argument("--encoder", default="hashing")
    args = ap.parse_args()
    pg, work = os.environ["LAM_TEST_PG_URL"], Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    reqs = [r for r in dt.agent_requests(args, work) if r[1] == "claude-code"]
    stub = sdk.Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    up = dt.sdk_upstream(stub)
    long_run(args, up, pg, work, reqs)
    side_by_side(args, up, pg, work, reqs)


if __name__ == "__main__":
    main()
