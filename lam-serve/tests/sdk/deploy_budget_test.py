"""The budget in a deployment (issue 54, item 7): the cuts a conversation
gets are records in the shared store, so three `lam serve` replicas behind
HAProxy (round robin, no affinity) on one PostgreSQL forward the bytes one
`lam serve` alone forwards, and so does one `lam serve` killed (SIGKILL)
and restarted after every cut.

The conversation is a real Claude Code session (`lam replay
--requests-out` writes its requests as the agent sent them), long enough
for several cuts at `--budget`; the upstream reports `usage` as one token
per 3 bytes of the request, more than lam's count, so the calibration
factor (learnt from the answers, recorded with the cuts) is above 1; and
one request comes after an idle gap longer than `--cache-ttl`, so it finds
the cache cold and is cut to the target (a decision made from a clock,
recorded too).

Passes, each its own `--run`, each with the same flags:

1. reference: one `lam serve` on a folder store;
2. replicas: three on PostgreSQL behind HAProxy;
3. restarts: one on PostgreSQL, SIGKILLed and restarted on the same port
   after every request at which a cut reached the upstream (so between
   every two cuts).

Checked: the reference makes several cuts (prefix changes on the wire),
at least one cold, with a calibration above 1; every pass forwards each
request byte for byte as the reference does (bodies differing: 0); every
`§id` cited recalls from the shared store what the reference's store holds.

usage: deploy_budget_test.py LAM WORK --transcript PATH [--requests N] [--budget B] [--encoder E]
Needs LAM_TEST_PG_URL (scripts/test-postgres.sh --with) and `haproxy`.
"""

import argparse
import http.server
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import deploy_test as dt
import httpx
import sdk_test as sdk
from raw_json import identity, raw_items

BYTES_PER_TOKEN = 3
TTL = 8
GAP = 10


class Dense(http.server.ThreadingHTTPServer):
    """An Anthropic Messages upstream that answers a short text and reports
    `usage.input_tokens` as the request's bytes / BYTES_PER_TOKEN."""
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), DenseHandler)
        self.lock = threading.Lock()
        self.seen = []  # (path, headers, body bytes)
        self.at = []  # when each came (monotonic seconds)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class DenseHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with self.server.lock:
            self.server.seen.append((self.path, dict(self.headers), body))
            self.server.at.append(time.monotonic())
        n = len(body) // BYTES_PER_TOKEN
        msg = {"id": "msg_dense", "type": "message", "role": "assistant", "content": [], "model": "stub", "stop_reason": None,
               "stop_sequence": None, "usage": {"input_tokens": n, "output_tokens": 1}}
        if not json.loads(body).get("stream"):
            out = json.dumps(dict(msg, content=[{"type": "text", "text": "ok"}], stop_reason="end_turn")).encode()
            ctype = "application/json"
        else:
            ev = [("message_start", {"type": "message_start", "message": msg}),
                  ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                  ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
                  ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                  ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 1}}),
                  ("message_stop", {"type": "message_stop"})]
            out = b"".join(f"event: {t}\ndata: {json.dumps(d)}\n\n".encode() for t, d in ev)
            ctype = "text/event-stream"
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def requests_of(args, work):
    """The first --requests requests of the transcript's first session, as
    (session, agent, path, body bytes)."""
    out = work / "budget-requests.jsonl"
    subprocess.run([args.lam, "replay", args.transcript, "--encoder", "hashing", "--no-cache", "--budget", "off", "--requests-out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    reqs = []
    with open(out, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if reqs and r["session"] != reqs[0][0]:
                continue
            if len(reqs) < args.requests:
                body = dt.raw_body(line)
                if args.spaced:
                    # As Python clients send JSON (the official SDKs: `json.dumps`, ", " and ": ").
                    body = json.dumps(json.loads(body)).encode()
                reqs.append((r["session"], r["agent"], r["path"], body))
    out.unlink()
    assert all(a == "claude-code" for _, a, _, _ in reqs), "a Claude Code transcript, please (the upstream speaks Messages)"
    return reqs


def cuts_on_wire(reqs, got):
    """Indices of the requests whose forwarded items change an earlier
    request's (a cut), apart from what the client itself rewrites."""
    out, prev = [], []
    for i, ((_, _, path, _), body) in enumerate(zip(reqs, got)):
        items = [identity(x) for x in raw_items(body, dt.field(path))]
        if items[:len(prev)] != prev:
            out.append(i)
        prev = items
    return out


def flags(args, run):
    return ["--run", run, "--budget", str(args.budget), "--cache-ttl", str(TTL)]


def send(url_of, reqs, up, gap_at, after=None):
    """Each request in order (`url_of(i)`: where to send request i), the
    idle gap before request `gap_at`; `after(i, forwarded bodies so far)`
    runs after each. Returns what the upstream got for each, and the
    longest time between two requests' arrivals upstream but across the
    gap (a cold cut elsewhere would be the clock's, not lam's, doing)."""
    got, at = [], []
    with httpx.Client(timeout=120) as c:
        for i, (_, agent, path, body) in enumerate(reqs):
            if i == gap_at:
                time.sleep(GAP)
            n = len(up.seen)
            r = c.post(url_of(i) + path, content=body, headers=dt.HEADERS[agent])
            assert r.status_code == 200, f"request {i}: {r.status_code} {r.text[:300]}"
            got.append(up.seen[n][2])
            at.append(up.at[n])
            if after:
                after(i, got)
    spacing = max(b - a for k, (a, b) in enumerate(zip(at, at[1:])) if k + 1 != gap_at)
    assert spacing < TTL, f"two requests came {spacing:.1f} s apart, more than the TTL ({TTL} s), away from the gap: the machine is too slow for this test"
    return got, spacing


def totals(servers):
    rows = [s for r in servers for s in r.stats()["sessions"]]
    return {"cuts": sum(s.get("cuts", 0) for s in rows), "cuts_cold": sum(s.get("cuts_cold", 0) for s in rows),
            "calibration": max([s.get("calibration", 1.0) for s in rows] or [1.0])}


def differing(got, want):
    return [i for i, (a, b) in enumerate(zip(got, want)) if a != b]


def check_recall(args, pg, run, ref_store, got, reqs):
    ids = {c for (_, _, path, _), body in zip(reqs, got) for it in raw_items(body, dt.field(path)) for c in sdk.CITED.findall(it)}
    assert ids, "no §id cited"
    for sid in sorted(ids):
        want = dt.recall_in(args.lam, ref_store, "ref", sid)
        assert want is not None and dt.recall_in(args.lam, pg, run, sid) == want, f"§{sid} in {run}: not the reference's bytes"
    return len(ids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lam")
    ap.add_argument("work")
    ap.add_argument("--transcript", required=True)
    ap.add_argument("--requests", type=int, default=90)
    ap.add_argument("--budget", type=int, default=20000)
    ap.add_argument("--encoder", default="hashing")
    ap.add_argument("--spaced", action="store_true", help="send each body re-encoded with spaces after , and :, as Python clients do")
    ap.add_argument("--no-restarts", action="store_true", help="the replicas alone, not the restarts after every cut")
    args = ap.parse_args()
    pg, work = os.environ["LAM_TEST_PG_URL"], Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    reqs = requests_of(args, work)
    gap_at = len(reqs) * 2 // 3
    up = Dense()
    threading.Thread(target=up.serve_forever, daemon=True).start()
    started = time.perf_counter()

    print(f"budget: {len(reqs)} requests of Claude Code session {reqs[0][0]}, --budget {args.budget} --cache-ttl {TTL}, "
          f"a {GAP} s gap before request {gap_at}; the upstream counts {BYTES_PER_TOKEN} bytes a token; --encoder {args.encoder}")
    ref_store = work / "ref-budget"
    ref = sdk.Serve(args.lam, up.url, ref_store, args.encoder, extra=flags(args, "ref"))
    want, spacing = send(lambda i: ref.url, reqs, up, gap_at)
    t = totals([ref])
    ref.stop()
    cuts = cuts_on_wire(reqs, want)
    print(f"  reference (one lam serve): {len(cuts)} cuts on the wire (lam: {t['cuts']}, {t['cuts_cold']} cold) at requests {cuts}, "
          f"calibration x{t['calibration']:.3f}; requests at most {spacing:.1f} s apart but across the gap")
    assert len(cuts) >= 3 and len(cuts) == t["cuts"], f"{len(cuts)} prefix changes on the wire, lam counted {t['cuts']}: several cuts wanted"
    assert t["cuts_cold"] >= 1 and gap_at in cuts, f"no cold cut after the gap (cuts at {cuts}, {t['cuts_cold']} cold)"
    assert t["calibration"] > 1.0, f"calibration x{t['calibration']}: the upstream counts more than lam, it should be above 1"

    run = "budget-replicas"
    reps = [sdk.Serve(args.lam, up.url, pg, args.encoder, extra=flags(args, run), log=work / f"budget-replica{i}.log", cache=pg) for i in range(dt.REPLICAS)]
    lb = dt.Balancer([r.port for r in reps], work)
    try:
        got, spacing = send(lambda i: lb.url, reqs, up, gap_at)
        served = [sum(s["requests"] for s in r.stats()["sessions"]) for r in reps]
    finally:
        lb.stop()
        for r in reps:
            r.stop()
    bad = differing(got, want)
    print(f"  {dt.REPLICAS} replicas behind HAProxy (requests per replica {served}, at most {spacing:.1f} s apart but across the gap): "
          f"{len(bad)} of {len(got)} bodies differ from the reference's")
    assert all(k > 0 for k in served), f"requests per replica {served}: the balancer did not rotate"
    assert not bad, f"{len(bad)} of {len(got)} bodies differ; first: " + dt.first_difference(reqs, got, want, bad[0])
    n = check_recall(args, pg, run, ref_store, got, reqs)
    if args.no_restarts:
        print(f"  every cited §id recalls the reference's bytes from the shared store ({n} §ids through the replicas); "
              f"budget passes took {time.perf_counter() - started:.0f} s")
        print("deployment budget tests passed")
        return

    run = "budget-restarts"
    box = [sdk.Serve(args.lam, up.url, pg, args.encoder, extra=flags(args, run), log=work / "budget-restart.log", cache=pg)]
    restarts, prev = [], [[]]

    def restart_after_cut(i, got):
        items = [identity(x) for x in raw_items(got[i], dt.field(reqs[i][2]))]
        cut, prev[0] = items[:len(prev[0])] != prev[0], items
        if cut and i + 1 < len(reqs):
            old = box[0]
            old.p.send_signal(signal.SIGKILL)
            old.p.wait(30)
            box[0] = sdk.Serve(args.lam, up.url, pg, args.encoder, extra=flags(args, run), port=old.port, log=work / "budget-restart.log", cache=pg)
            restarts.append(i)

    try:
        got, spacing = send(lambda i: box[0].url, reqs, up, gap_at, after=restart_after_cut)
    finally:
        if box[0].p.poll() is None:
            box[0].stop()
    bad = differing(got, want)
    print(f"  one lam serve SIGKILLed and restarted after every cut ({len(restarts)} restarts, after requests {restarts}; "
          f"requests at most {spacing:.1f} s apart, restarts included, but across the gap): "
          f"{len(bad)} of {len(got)} bodies differ from the reference's")
    assert len(restarts) >= 2, f"{len(restarts)} restarts"
    assert not bad, f"{len(bad)} of {len(got)} bodies differ; first: " + dt.first_difference(reqs, got, want, bad[0])
    m = check_recall(args, pg, run, ref_store, got, reqs)
    print(f"  every cited §id recalls the reference's bytes from the shared store ({n} §ids through the replicas, {m} through the restarts); "
          f"budget passes took {time.perf_counter() - started:.0f} s")
    print("deployment budget tests passed")


if __name__ == "__main__":
    main()
