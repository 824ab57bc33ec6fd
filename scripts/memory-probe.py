#!/usr/bin/env python3
"""Resident memory of `lam serve` under load (issue #57): a loopback upstream
stub, the proxy started as a child process, and two loads.

1. `passes`: CONVERSATIONS chat conversations, each carrying about
   RESULT_MIB of tool results (several tool messages of random hex words,
   distinct per conversation, so nothing merges), sent by CLIENTS clients;
   the same bodies again for PASSES passes. After each pass: the proxy's
   resident set (VmRSS), its peak (VmHWM) and `memory_bytes` (GET /lam/stats).
2. `burst`: BURST bodies of BURST_MIB each sent at once: peak RSS during
   the burst (VmHWM, reset first through /proc/PID/clear_refs) and RSS
   afterwards, with the status codes (503: refused for memory).

Python 3.11 standard library only. Prints a Markdown table, and with
--json FILE writes the numbers. Example:

    cargo build -p lam-ctx
    python3 scripts/memory-probe.py --lam target/debug/lam --max-memory 32MiB

Options also: --env K=V (for the proxy, e.g. MALLOC_ARENA_MAX=1), --wrap
"heaptrack -o FILE" (run the proxy under a profiler), --only passes|burst.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import http.client
import http.server
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPLY = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "stub",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


class Upstream(http.server.BaseHTTPRequestHandler):
    """Reads each request, keeps nothing, answers REPLY."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("content-length") or 0)
        while n > 0:
            got = self.rfile.read(min(n, 1 << 20))
            if not got:
                break
            n -= len(got)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)

    def log_message(self, *_: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def words(rng: random.Random, size: int) -> str:
    """About `size` bytes of random 8-hex-digit words, 8 a line."""
    raw = rng.randbytes(size // 18 * 8 + 32).hex()
    lines = []
    n = 0
    for i in range(0, len(raw) - 64, 64):
        row = raw[i : i + 64]
        line = " ".join(row[k : k + 8] for k in range(0, 64, 8))
        lines.append(line)
        n += len(line) + 1
        if n >= size:
            break
    return "\n".join(lines) + "\n"


def conversation(tag: str, total: int, results: int) -> bytes:
    """A chat-completions body: a task, then `results` tool calls whose
    results sum to about `total` bytes, distinct per `tag`."""
    rng = random.Random(tag)
    msgs: list[dict] = [{"role": "user", "content": f"task {tag}: look at the logs"}]
    for k in range(results):
        cid = f"call_{k}"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat log{k}.txt"})}}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": words(rng, total // results)})
    return json.dumps({"model": "stub", "messages": msgs}).encode()


def status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def reset_peak(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def post(port: int, body: bytes, timeout: float = 600) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/v1/chat/completions", body=body, headers={"content-type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    except (ConnectionError, http.client.HTTPException) as e:
        # Status 0: the connection was cut before an answer.
        return 0, str(e).encode()
    finally:
        c.close()


def stats(port: int) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("GET", "/lam/stats")
        return json.loads(c.getresponse().read())
    finally:
        c.close()


def mib(kib: int) -> float:
    return kib / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lam", default="target/debug/lam")
    ap.add_argument("--max-memory", default="32MiB")
    ap.add_argument("--conversations", type=int, default=64)
    ap.add_argument("--result-mib", type=float, default=1.0)
    ap.add_argument("--results", type=int, default=4, help="tool results per conversation")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--burst", type=int, default=8)
    ap.add_argument("--burst-mib", type=float, default=9.3)
    ap.add_argument("--encoders", type=int, default=0, help="--encoders for the proxy (0: its default)")
    ap.add_argument("--only", choices=["passes", "burst"], default=None)
    ap.add_argument("--env", action="append", default=[], help="K=V for the proxy's environment")
    ap.add_argument("--wrap", default="", help="command prefix for the proxy (a profiler)")
    ap.add_argument("--label", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--extra", default="", help="more `lam serve` arguments")
    a = ap.parse_args()

    up_port = free_port()
    up = http.server.ThreadingHTTPServer(("127.0.0.1", up_port), Upstream)
    threading.Thread(target=up.serve_forever, daemon=True).start()

    work = tempfile.mkdtemp(prefix="lam-memory-probe.")
    port = free_port()
    cmd = shlex.split(a.wrap) + [
        a.lam,
        "serve",
        "--listen",
        f"127.0.0.1:{port}",
        "--upstream",
        f"http://127.0.0.1:{up_port}",
        "--store",
        os.path.join(work, "store"),
        "--encoder",
        "hashing",
        "--no-cache",
        "--max-memory",
        a.max_memory,
    ]
    if a.encoders:
        cmd += ["--encoders", str(a.encoders)]
    cmd += shlex.split(a.extra)
    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    proc = subprocess.Popen(cmd, env=env, stderr=open(os.path.join(work, "serve.log"), "w"))
    pid = proc.pid
    # Under a wrapper the proxy is the wrapper's child: find it.
    deadline = time.time() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                print(open(os.path.join(work, "serve.log")).read(), file=sys.stderr)
                raise SystemExit("lam serve did not start")
            time.sleep(0.2)
    if a.wrap:
        kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        pid = int(kids[0]) if kids else pid

    result: dict = {"label": a.label, "max_memory": a.max_memory, "start_rss_mib": mib(status(pid)["VmRSS"]), "passes": [], "burst": None}
    print(f"# lam serve {a.label} (pid {pid}, --max-memory {a.max_memory}, env {a.env}); RSS at start {result['start_rss_mib']:.0f} MiB", flush=True)

    try:
        if a.only in (None, "passes"):
            t = time.time()
            size = int(a.result_mib * (1 << 20))
            bodies = [conversation(f"conv{i}", size, a.results) for i in range(a.conversations)]
            print(f"# {a.conversations} conversations x {sum(map(len, bodies)) / len(bodies) / 2**20:.2f} MiB bodies ({a.results} tool results each), made in {time.time() - t:.1f} s; {a.clients} clients", flush=True)
            print("| pass | s | RSS MiB | peak RSS MiB | memory_bytes MiB | sessions held | evicted | statuses |")
            print("|---|---|---|---|---|---|---|---|")
            for p in range(1, a.passes + 1):
                t = time.time()
                with cf.ThreadPoolExecutor(a.clients) as ex:
                    codes = [s for s, _ in ex.map(lambda b: post(port, b), bodies)]
                st = stats(port)
                s = status(pid)
                row = {
                    "pass": p,
                    "seconds": time.time() - t,
                    "rss_mib": mib(s["VmRSS"]),
                    "peak_mib": mib(s["VmHWM"]),
                    "memory_bytes_mib": st["memory_bytes"] / 2**20,
                    "sessions": len(st["sessions"]),
                    "evicted": st["evicted_sessions"],
                    "statuses": {str(c): codes.count(c) for c in sorted(set(codes))},
                }
                result["passes"].append(row)
                print(
                    f"| {p} | {row['seconds']:.1f} | {row['rss_mib']:.0f} | {row['peak_mib']:.0f} | {row['memory_bytes_mib']:.1f} | {row['sessions']} | {row['evicted']} | {row['statuses']} |",
                    flush=True,
                )
            del bodies
        if a.only in (None, "burst"):
            size = int(a.burst_mib * (1 << 20))
            bodies = [conversation(f"burst{i}", size, 40) for i in range(a.burst)]
            before = status(pid)["VmRSS"]
            reset = reset_peak(pid)
            t = time.time()
            with cf.ThreadPoolExecutor(a.burst) as ex:
                answers = list(ex.map(lambda b: post(port, b), bodies))
            codes = [s for s, _ in answers]
            s = status(pid)
            time.sleep(1)
            after = status(pid)["VmRSS"]
            st = stats(port)
            refused = [b.decode(errors="replace")[:300] for c, b in answers if c == 503]
            result["burst"] = {
                "bodies": a.burst,
                "body_mib": sum(map(len, bodies)) / len(bodies) / 2**20,
                "seconds": time.time() - t,
                "before_mib": mib(before),
                "peak_mib": mib(s["VmHWM"]) if reset else None,
                "after_mib": mib(after),
                "memory_bytes_mib": st["memory_bytes"] / 2**20,
                "statuses": {str(c): codes.count(c) for c in sorted(set(codes))},
                "refused_example": refused[0] if refused else None,
            }
            b = result["burst"]
            peak = f"{b['peak_mib']:.0f}" if b["peak_mib"] is not None else "n/a"
            print(f"# burst: {a.burst} bodies of {b['body_mib']:.1f} MiB at once in {b['seconds']:.1f} s")
            print("| RSS before MiB | peak RSS MiB | RSS after MiB | memory_bytes MiB | statuses |")
            print("|---|---|---|---|---|")
            print(f"| {b['before_mib']:.0f} | {peak} | {b['after_mib']:.0f} | {b['memory_bytes_mib']:.1f} | {b['statuses']} |", flush=True)
            if refused:
                print(f"# a 503: {refused[0]}")
    finally:
        os.kill(pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        up.shutdown()
        subprocess.run(["rm", "-rf", work])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
