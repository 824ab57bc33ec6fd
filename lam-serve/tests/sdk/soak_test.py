"""A proxy that runs for weeks, in minutes: real agent traffic (every
shared transcript, as the agents send it: `lam replay --requests-out`)
replayed pass after pass through one `lam serve` on PostgreSQL under
`--max-memory`, each pass as new conversations (`x-lam-session`), with
PostgreSQL stopped part-way through one pass and started again.

Checked:
- 0 failed requests: every request answered 200, outage or not;
- RSS flat: from the second pass on, within 10 % of the second pass's
  (`/proc/PID/status` VmRSS after each pass), and under the bound
  docs/serve.md states for `--max-memory` (M + min(M, 16 x --max-body-mib)
  + 96 MiB);
- the outage costs no request more than a second: each request sent while
  PostgreSQL was down took at most 1 s more than the same request in the
  first pass, and the proxy counted it (`store_unavailable`, `store_outages`);
- nothing acknowledged is lost: every tool result of the outage pass that a
  request carried while the store was up, or again after it came back, is
  in its store session byte for byte (SHA-256 of the stored body, read with
  psql), results held in the outage included (`archived_late`); and every
  `§id` cited upstream in that pass recalls through `lam recall`.

usage: soak_test.py LAM CORPUS WORK [--passes N] [--per-session N] [--outage-pass K] [--outage-s S] [--max-memory MIB] [--max-body-mib MIB]
Needs LAM_TEST_PG_URL, LAM_TEST_PG_CTL and LAM_TEST_PSQL (scripts/test-postgres.sh --with).
"""

import argparse
import hashlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import deploy_test as deploy
import httpx
import sdk_test as sdk
from raw_json import raw_items


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for pid {pid}")


def texts(api, item):
    """The tool results of one raw item, as the strings lam archives."""
    out = []
    for o in sdk.observations(api, item):
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, list):
            out.extend(b["text"] for b in o if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
    return [t for t in out if t]


def api_of(path):
    return "messages" if path.endswith("/messages") else "responses" if path.endswith("/responses") else "chat"


def results(path, body):
    api = api_of(path)
    return {t for it in raw_items(body, deploy.field(path)) for t in texts(api, it)}


def pg(action):
    r = subprocess.run([os.environ["LAM_TEST_PG_CTL"], action, *(["-m", "fast"] if action == "stop" else [])], capture_output=True, timeout=120)
    assert r.returncode == 0, f"pg_ctl {action}: {r.stderr.decode()}"


def stored_digests(prefix):
    """SHA-256 of every stored body, per store session starting with `prefix`."""
    sql = (f"SELECT convert_from(session, 'UTF8'), encode(sha256(body), 'hex') FROM lam_obs "
           f"WHERE convert_from(session, 'UTF8') LIKE '{prefix}%'")
    r = subprocess.run([os.environ["LAM_TEST_PSQL"], os.environ["LAM_TEST_PG_URL"], "-At", "-F", "\t", "-c", sql], capture_output=True, timeout=300)
    assert r.returncode == 0, f"psql: {r.stderr.decode()}"
    out = {}
    for line in r.stdout.decode().splitlines():
        session, digest = line.split("\t")
        out.setdefault(session, set()).add(digest)
    return out


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Soak:
    def __init__(self, args, reqs, serve, stub):
        self.args, self.reqs, self.serve, self.stub = args, reqs, serve, stub
        self.times = {}  # (pass, i) -> seconds
        self.failed = []
        self.sent = {}  # (pass, i) -> (up, body forwarded)
        self.outage = None  # (first index sent down, first index sent up again)

    def session(self, p, i):
        return f"soak{p}-{self.reqs[i][0]}"

    def send(self, c, p, i, up):
        session, agent, path, body = self.reqs[i]
        headers = {**deploy.HEADERS[agent], "x-lam-session": self.session(p, i)}
        n = len(self.stub.seen)
        started = time.monotonic()
        r = c.post(self.serve.url + path, content=body, headers=headers)
        self.times[(p, i)] = time.monotonic() - started
        if r.status_code != 200:
            self.failed.append(f"pass {p} request {i} ({session}): {r.status_code} {r.text[:200]}")
            return
        # What was forwarded is kept for the outage pass only (it is checked).
        self.sent[(p, i)] = (up, self.stub.seen[n][2] if p == self.args.outage_pass else b"")

    def run_pass(self, p, outage):
        n = len(self.reqs)
        down_at = n // 3 if outage else n
        with httpx.Client(timeout=120) as c:
            for i in range(down_at):
                self.send(c, p, i, True)
            if not outage:
                return
            pg("stop")
            stopped, i = time.monotonic(), down_at
            while i < n and (time.monotonic() - stopped < self.args.outage_s or i == down_at):
                self.send(c, p, i, False)
                i += 1
            pg("start")
            started = time.monotonic()
            # The proxy finds the store back within its probe interval (1 s):
            # what it forwards from then on is archived before it goes.
            while self.serve.stats()["store_down"]:
                assert time.monotonic() - started < 10, "the proxy did not find the store back within 10 s"
                time.sleep(0.05)
            self.outage = (down_at, i)
            print(f"  pass {p}: PostgreSQL stopped for {started - stopped:.1f} s, {i - down_at} requests sent meanwhile; "
                  f"the proxy found it back {time.monotonic() - started:.2f} s after it started")
            for j in range(i, n):
                self.send(c, p, j, True)


def check_outage(soak, p):
    a, b = soak.outage
    added = [soak.times[(p, i)] - soak.times[(1, i)] for i in range(a, b)]
    worst = max(added)
    during = [soak.times[(p, i)] for i in range(a, b)]
    st = soak.serve.stats()
    print(f"  outage: {b - a} requests, {max(during) * 1e3:.0f} ms the slowest, {worst * 1e3:+.0f} ms the most added over pass 1; "
          f"store_unavailable {st['store_unavailable']}, store_outages {st['store_outages']}, archived_late {st['archived_late']}")
    assert worst <= 1.0, f"a request in the outage took {worst:.2f} s more than in pass 1"
    assert st["store_outages"] >= 1 and st["store_unavailable"] >= 1, f"the outage was not counted: {st}"
    assert not st["store_down"], "the store is still marked down after the server came back"
    assert st["archived_late"] >= 1, "no result held in the outage was archived when carried again"


def check_archived(soak, p):
    """Every result of pass `p` carried while the store was up is stored, byte for byte, in its session."""
    want, held = {}, set()
    for i in range(len(soak.reqs)):
        got = soak.sent.get((p, i))
        if got is None:
            continue
        _, _, path, body = soak.reqs[i]
        if got[0]:
            want.setdefault(soak.session(p, i), set()).update(digest(t) for t in results(path, body))
        else:
            held.update(digest(t) for t in results(path, body))
    stored = stored_digests(f"soak{p}-")
    missing = [(s, d) for s, ds in want.items() for d in ds if d not in stored.get(s, set())]
    assert not missing, f"{len(missing)} results acknowledged in pass {p} are not in their store session; first: {missing[0]}"
    late = sum(1 for s, ds in want.items() for d in ds if d in held)
    total = sum(len(ds) for ds in want.values())
    print(f"  pass {p}: {total} distinct results acknowledged, every one stored byte for byte ({late} of them were first sent in the outage)")
    cited = sorted({(soak.session(p, i), c) for i in range(len(soak.reqs)) if (p, i) in soak.sent
                    for it in raw_items(soak.sent[(p, i)][1], deploy.field(soak.reqs[i][2]))
                    for o in texts(api_of(soak.reqs[i][2]), it) for c in sdk.CITED.findall(o)})
    sample = cited[:: max(1, len(cited) // 40)]
    for session, sid in sample:
        assert deploy.recall_in(soak.args.lam, os.environ["LAM_TEST_PG_URL"], session, sid) is not None, f"§{sid} ({session}) does not recall"
    print(f"  pass {p}: {len(sample)} of {len(cited)} cited §ids recalled (every {max(1, len(cited) // 40)}th)")


def check_rss(rss, bound):
    base = rss[1]
    print("  RSS per pass (MiB): " + ", ".join(f"{r:.0f}" for r in rss) + f"; bound {bound:.0f}")
    assert all(r <= base * 1.10 for r in rss[1:]), f"RSS grew more than 10 % after the second pass: {rss}"
    assert max(rss) <= bound, f"RSS {max(rss):.0f} MiB over the stated bound {bound:.0f} MiB"


def arguments():
    a = argparse.ArgumentParser()
    a.add_argument("lam")
    a.add_argument("corpus")
    a.add_argument("work", type=Path)
    a.add_argument("--passes", type=int, default=5)
    a.add_argument("--per-session", type=int, default=60)
    a.add_argument("--outage-pass", type=int, default=2)
    a.add_argument("--outage-s", type=float, default=5.0)
    a.add_argument("--max-memory", type=int, default=16, help="MiB (small, so sessions are evicted from the first pass on)")
    a.add_argument("--max-body-mib", type=int, default=32, help="lam serve's --max-body-mib (its default)")
    a.add_argument("--encoder", default="hashing")
    args = a.parse_args()
    args.transcripts = [str(Path(args.corpus) / "agent-transcripts")]
    return args


def main():
    args = arguments()
    reqs = deploy.agent_requests(args, args.work)
    stub = sdk.Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{stub.server_address[1]}"
    serve = sdk.Serve(args.lam, upstream, os.environ["LAM_TEST_PG_URL"], args.encoder, log=args.work / "serve.log",
                      extra=["--run", "soak", "--max-memory", f"{args.max_memory}MiB", "--max-body-mib", str(args.max_body_mib)])
    print(f"soak: {len(reqs)} real requests per pass ({len({r[0] for r in reqs})} sessions, up to {args.per_session} each), "
          f"{args.passes} passes, --max-memory {args.max_memory}MiB, PostgreSQL stopped in pass {args.outage_pass}")
    soak, rss = Soak(args, reqs, serve, stub), []
    try:
        for p in range(1, args.passes + 1):
            started = time.monotonic()
            soak.run_pass(p, p == args.outage_pass)
            stub.seen.clear()
            rss.append(rss_mib(serve.p.pid))
            st = serve.stats()
            print(f"  pass {p}: {time.monotonic() - started:.0f} s, RSS {rss[-1]:.0f} MiB, memory_bytes {st['memory_bytes'] / 2**20:.1f} MiB, "
                  f"{st['evicted_sessions']} sessions evicted so far")
        assert not soak.failed, f"{len(soak.failed)} requests failed; first: {soak.failed[0]}"
        print(f"  0 failed requests of {len(reqs) * args.passes}")
        check_outage(soak, args.outage_pass)
        check_archived(soak, args.outage_pass)
        # docs/serve.md, "Memory": M + min(M, 16 x --max-body-mib) + 96 MiB.
        check_rss(rss, args.max_memory + min(args.max_memory, 16 * args.max_body_mib) + 96)
    finally:
        serve.stop()
        stub.shutdown()
    print("soak: passed")


if __name__ == "__main__":
    main()
