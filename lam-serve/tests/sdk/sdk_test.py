"""`lam serve` with the official `openai` and `anthropic` SDKs.

Starts a loopback upstream stub (records every request body, answers JSON or
SSE in each API's shape) and the real `lam serve` binary in front of it, then
replays real trajectories from the corpus as growing conversations with tool
results (chat completions, messages, responses; streaming and not) and checks:
tool results are forwarded compacted (fewer tokens), every earlier item is
forwarded byte-identically turn after turn, streamed answers arrive unchanged
(and event by event), every cited §id recalls exactly through `lam recall`
(and through the official `mcp` client talking to `lam mcp` over stdio),
SIGTERM finishes an in-flight stream, and 64 concurrent sessions run without
errors.

usage: sdk_test.py LAM_BINARY CORPUS_DIR WORK_DIR [--encoder bert|hashing]
"""

import argparse
import gzip
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import httpx
import openai
from raw_json import raw_items

N_EVENTS = 6


# ---------------------------------------------------------------- upstream stub

def sse_events(path):
    """The SSE events the stub streams for `path` (bytes each)."""
    ev = []
    if path.endswith("/messages"):
        msg = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "stub",
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 0}}
        ev.append(("message_start", {"type": "message_start", "message": msg}))
        ev.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
        for k in range(N_EVENTS):
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"tok{k} "}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": N_EVENTS}}))
        ev.append(("message_stop", {"type": "message_stop"}))
        return [f"event: {t}\ndata: {json.dumps(d)}\n\n".encode() for t, d in ev]
    if path.endswith("/responses"):
        resp = response_object("")
        ev.append({"type": "response.created", "sequence_number": 0, "response": dict(resp, status="in_progress", output=[])})
        for k in range(N_EVENTS):
            ev.append({"type": "response.output_text.delta", "sequence_number": k + 1, "item_id": "msg_1", "output_index": 0,
                       "content_index": 0, "delta": f"tok{k} ", "logprobs": []})
        ev.append({"type": "response.completed", "sequence_number": N_EVENTS + 1, "response": response_object(expected_text())})
        return [f"event: {d['type']}\ndata: {json.dumps(d)}\n\n".encode() for d in ev]
    for k in range(N_EVENTS):
        ev.append({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "stub",
                   "choices": [{"index": 0, "delta": {"content": f"tok{k} "}, "finish_reason": None}]})
    out = [f"data: {json.dumps(d)}\n\n".encode() for d in ev]
    return out + [b"data: [DONE]\n\n"]


def expected_text():
    return "".join(f"tok{k} " for k in range(N_EVENTS))


def response_object(text):
    return {"id": "resp_1", "object": "response", "created_at": 1, "model": "stub", "status": "completed",
            "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def json_reply(path):
    if path.endswith("/messages"):
        return {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                "model": "stub", "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    if path.endswith("/responses"):
        return response_object("ok")
    return {"id": "c1", "object": "chat.completion", "created": 1, "model": "stub",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class Stub(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # The load test opens 64 connections at once; socketserver's default
    # listen backlog of 5 makes the kernel reset some of them.
    request_queue_size = 256

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.seen = []  # (path, headers, body bytes)
        self.gate = threading.Event()
        self.gate_timeouts = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with self.server.lock:
            self.server.seen.append((self.path, dict(self.headers), body))
        req = json.loads(body)
        if not req.get("stream"):
            out = json.dumps(json_reply(self.path)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        gated = self.headers.get("x-stub-gate") == "1"
        try:
            for k, ev in enumerate(sse_events(self.path)):
                if k == 1 and gated and not self.server.gate.wait(10):
                    self.server.gate_timeouts += 1
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the proxy went away mid-stream (deploy_test.py kills one)


# ---------------------------------------------------------------- the proxy

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """`lam serve` on a loopback port (`port`, else a free one), its log
    in `log` (else next to a folder `store`), no embedding cache unless
    `cache` names one."""

    def __init__(self, lam, upstream, store, encoder, extra=(), port=None, log=None, cache=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log or Path(store).with_suffix(".log"), "a")
        caching = ["--cache", cache] if cache else ["--no-cache"]
        cmd = [lam, "serve", "--listen", f"127.0.0.1:{self.port}", "--upstream", upstream, "--store", str(store),
               "--encoder", encoder, *caching, "--recall", "recall", *extra]
        self.p = subprocess.Popen(cmd, stderr=self.log)
        for _ in range(600):
            try:
                httpx.get(self.url + "/lam/stats", timeout=1)
                return
            except httpx.TransportError:
                if self.p.poll() is not None:
                    raise SystemExit(f"lam serve exited with {self.p.returncode}: see {self.log.name}")
                time.sleep(0.1)
        raise SystemExit("lam serve did not start")

    def stats(self):
        return httpx.get(self.url + "/lam/stats").json()

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(60)
        assert rc == 0, f"lam serve exited with {rc}"


# ---------------------------------------------------------------- trajectories

def load_trajectories(corpus, count, steps):
    d = Path(corpus) / "mini-swe-agent-gemini3pro-swebench-verified" / "trajs"
    out = []
    for f in sorted(d.glob("*.traj.json.gz"))[:count]:
        m = json.loads(gzip.decompress(f.read_bytes()))["messages"]
        system, task = m[0]["content"], m[1]["content"]
        steps_ = []
        for a, o in zip(m[2::2], m[3::2]):
            if a["role"] != "assistant" or o["role"] != "user":
                break
            found = re.findall(r"```bash\n(.*?)\n```", a["content"], re.S)
            steps_.append({"thought": a["content"], "command": found[0] if found else a["content"], "obs": o["content"]})
        out.append({"name": f.name.split(".")[0], "system": system, "task": task, "steps": steps_[:steps]})
    return out


def conversation(api, t, k, tag=""):
    """(system, items) after k observations, in `api`'s shape."""
    items = [{"role": "user", "content": t["task"] + tag}]
    for j, s in enumerate(t["steps"][:k]):
        cid = f"call_{j}"
        args = json.dumps({"command": s["command"]})
        if api == "chat":
            items.append({"role": "assistant", "content": s["thought"],
                          "tool_calls": [{"id": cid, "type": "function", "function": {"name": "bash", "arguments": args}}]})
            items.append({"role": "tool", "tool_call_id": cid, "content": s["obs"]})
        elif api == "messages":
            items.append({"role": "assistant", "content": [{"type": "text", "text": s["thought"]},
                                                           {"type": "tool_use", "id": cid, "name": "bash", "input": {"command": s["command"]}}]})
            items.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": s["obs"]}]})
        else:
            items.append({"type": "function_call", "call_id": cid, "name": "bash", "arguments": args})
            items.append({"type": "function_call_output", "call_id": cid, "output": s["obs"]})
    return items


TOOLS = {
    "chat": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}],
    "messages": [{"name": "bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
    "responses": [{"type": "function", "name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}],
}


def call(clients, api, t, k, stream, tag=""):
    """One request through the SDK; returns the answer's text."""
    items = conversation(api, t, k, tag)
    if api == "chat":
        msgs = [{"role": "system", "content": t["system"]}] + items
        r = clients["openai"].chat.completions.create(model="stub", messages=msgs, tools=TOOLS[api], stream=stream)
        return "".join(c.choices[0].delta.content or "" for c in r) if stream else r.choices[0].message.content
    if api == "messages":
        r = clients["anthropic"].messages.create(model="stub", max_tokens=64, system=t["system"], messages=items, tools=TOOLS[api], stream=stream)
        return "".join(e.delta.text for e in r if e.type == "content_block_delta") if stream else r.content[0].text
    r = clients["openai"].responses.create(model="stub", instructions=t["system"], input=items, tools=TOOLS[api], stream=stream)
    return "".join(e.delta for e in r if e.type == "response.output_text.delta") if stream else r.output_text


def make_clients(url):
    return {"openai": openai.OpenAI(base_url=url + "/v1", api_key="sk-test-openai", max_retries=0),
            "anthropic": anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)}


# ---------------------------------------------------------------- checks

FIELD = {"chat": "messages", "messages": "messages", "responses": "input"}


def observations(api, item):
    v = json.loads(item)
    if api == "chat" and v.get("role") == "tool":
        return [v["content"]]
    if api == "messages" and isinstance(v.get("content"), list):
        return [b["content"] for b in v["content"] if b.get("type") == "tool_result"]
    if api == "responses" and v.get("type") == "function_call_output":
        return [v["output"]]
    return []


# Started with `--recall recall` (lam mcp's tool, as the MCP check below calls it).
STUB = re.compile(r"^\[lam: .*; recall §([0-9a-f]{4,40})\]$")
CITED = re.compile(r"§([0-9a-f]{4,40})")


def recall(lam, store, sid, session=None):
    """`lam recall` of §sid, store-wide or in `session`."""
    r = subprocess.run([lam, "recall", "--store", str(store), *(["--session", session] if session else []), "§" + sid], capture_output=True)
    assert r.returncode == 0, f"lam recall §{sid}: {r.stderr.decode()}"
    return r.stdout.decode()


def replay(args, serve, stub, trajectories):
    """Every trajectory through every API, turn by turn, streaming every other turn."""
    clients = make_clients(serve.url)
    convs = []
    for api in ("chat", "messages", "responses"):
        for t in trajectories:
            prev, last = [], None
            for k in range(1, len(t["steps"]) + 1):
                stream = k % 2 == 0
                n = len(stub.seen)
                text = call(clients, api, t, k, stream)
                assert text == (expected_text() if stream else "ok"), f"{api} answer changed: {text!r}"
                assert len(stub.seen) == n + 1
                path, headers, body = stub.seen[-1]
                assert path.endswith({"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}[api])
                auth = headers.get("Authorization") or headers.get("authorization") or headers.get("X-Api-Key") or headers.get("x-api-key")
                assert auth and "sk-" in auth, "auth headers pass through"
                now = raw_items(body, FIELD[api])
                assert now[:len(prev)] == prev, f"{api} {t['name']} turn {k}: an earlier item changed on the wire"
                prev, last = now, body
            sent = [o for it in raw_items(last, FIELD[api]) for o in observations(api, it)]
            originals = [s["obs"] for s in t["steps"]]
            assert len(sent) == len(originals)
            convs.append((api, t["name"], sent, originals))
            print(f"  {api:9} {t['name']:28} {len(t['steps'])} turns: {sum(map(len, originals))} -> {sum(map(len, sent))} bytes of tool results forwarded")
    return convs


def check_stats(serve, n_convs):
    st = serve.stats()
    assert len(st["sessions"]) == n_convs, f"{len(st['sessions'])} sessions for {n_convs} conversations"
    for s in st["sessions"]:
        assert s["admission_errors"] == 0, s
        assert s["tokens_out"] < s["tokens_in"], f"no compaction in {s}"
    tin = sum(s["tokens_in"] for s in st["sessions"])
    tout = sum(s["tokens_out"] for s in st["sessions"])
    print(f"  cl100k tokens of tool results: {tin} in, {tout} forwarded ({100 * (1 - tout / tin):.1f}% removed)")
    return st


def check_recall(lam, store, convs, session=None):
    cache, n = {}, 0
    get = lambda sid: cache.setdefault(sid, recall(lam, store, sid, session))
    for api, name, sent, originals in convs:
        pool = set(originals)
        for s, o in zip(sent, originals):
            for line in s.split("\n"):
                if not (line.startswith("[lam: ") and line.endswith("]")):
                    continue
                m = STUB.match(line)
                if m:  # the line that carries the observation's own recall handle
                    assert get(m.group(1)) == o, f"{api} {name}: §{m.group(1)} does not recall its original"
                for cited in CITED.findall(line):
                    assert get(cited) in pool, f"{api} {name}: §{cited} recalls no original of the conversation"
                n += 1
    assert n > 0, "no stubs at all"
    print(f"  {n} stubs, {len(cache)} distinct §ids recalled exactly with lam recall")
    return cache


def check_recall_mcp(lam, store, expected, proxy_run=None):
    """The same §ids through the official `mcp` client talking to `lam mcp`
    over stdio (scoped to `proxy_run`, as `lam run` registers it)."""
    import asyncio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def run():
        params = StdioServerParameters(command=lam, args=["mcp", "--store", str(store), *(["--run", proxy_run] if proxy_run else [])])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                for sid, want in expected.items():
                    r = await s.call_tool("recall", {"id": "§" + sid})
                    texts = [c.text for c in r.content if c.type == "text"]
                    assert not r.isError, f"mcp recall §{sid}: {texts}"
                    assert texts == [want], f"mcp recall §{sid} does not return the original"

    asyncio.run(run())
    scope = f" --run {proxy_run}" if proxy_run else ""
    print(f"  the same {len(expected)} §ids recalled exactly, by the id alone, through the mcp client and lam mcp{scope} (stdio)")


def check_stream_and_shutdown(serve, stub):
    """Raw bytes: the first event arrives before the upstream sends the second; SIGTERM finishes the stream."""
    for path, body in (("/v1/chat/completions", {"model": "stub", "stream": True, "messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/messages", {"model": "stub", "stream": True, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/responses", {"model": "stub", "stream": True, "input": [{"role": "user", "content": "hi"}]})):
        last = path == "/v1/responses"
        stub.gate.clear()
        with httpx.stream("POST", serve.url + path, json=body, headers={"x-stub-gate": "1"}, timeout=30) as r:
            it = r.iter_raw()
            got = next(it)
            events = sse_events(path)
            assert got == events[0], f"{path}: first event {got!r}"
            if last:
                serve.p.send_signal(signal.SIGTERM)
                time.sleep(0.3)
            stub.gate.set()
            got += b"".join(it)
        assert got == b"".join(events), f"{path}: stream changed"
        assert stub.gate_timeouts == 0
    assert serve.p.wait(60) == 0, "lam serve exits 0 after SIGTERM"
    print("  streams pass event by event and unchanged; SIGTERM finished the in-flight stream")


def load_test(args, trajectories, work):
    stub = Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    serve = Serve(args.lam, f"http://127.0.0.1:{stub.server_address[1]}", work / "load-store", "hashing")
    apis = ("chat", "messages", "responses")
    turns = 5

    def worker(i):
        clients = make_clients(serve.url)
        api, t = apis[i % 3], trajectories[i % len(trajectories)]
        for k in range(1, turns + 1):
            text = call(clients, api, t, k, stream=(i + k) % 2 == 0, tag=f"\n(worker {i})")
            assert text in ("ok", expected_text())
        return i

    t0 = time.time()
    with ThreadPoolExecutor(64) as ex:
        done = list(ex.map(worker, range(64)))
    dt = time.time() - t0
    assert done == list(range(64))
    st = serve.stats()
    assert len(st["sessions"]) == 64, f"{len(st['sessions'])} sessions for 64 workers"
    assert all(s["admission_errors"] == 0 and s["requests"] == turns for s in st["sessions"]), st["sessions"]
    assert st["upstream_errors"] == 0 and st["upstream_unreachable"] == 0
    # Per worker, every request extends the previous one byte for byte.
    by = {}
    for path, _, body in stub.seen:
        api = "messages" if path.endswith("/messages") else "responses" if path.endswith("/responses") else "chat"
        items = raw_items(body, FIELD[api])
        w = re.search(r"\(worker (\d+)\)", json.loads(items[1 if api == "chat" else 0])["content"]).group(1)
        by.setdefault(w, []).append(items)
    assert len(by) == 64
    for reqs in by.values():
        for a, b in zip(reqs, reqs[1:]):
            assert b[:len(a)] == a
    serve.stop()
    print(f"  load: 64 concurrent sessions x {turns} turns ({64 * turns} requests) in {dt:.1f} s, no errors, prefix-stable")


def arguments():
    """The arguments every replay of trajectories takes: LAM CORPUS WORK
    [--encoder E] [--trajectories N] [--steps K]; add more, then parse."""
    ap = argparse.ArgumentParser()
    ap.add_argument("lam")
    ap.add_argument("corpus")
    ap.add_argument("work")
    ap.add_argument("--encoder", default="hashing")
    ap.add_argument("--trajectories", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    return ap


def main():
    args = arguments().parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    trajectories = load_trajectories(args.corpus, args.trajectories, args.steps)
    assert len(trajectories) == args.trajectories

    stub = Stub()
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    store = work / "store"
    serve = Serve(args.lam, f"http://127.0.0.1:{stub.server_address[1]}", store, args.encoder)
    print(f"replaying {len(trajectories)} trajectories x 3 APIs through lam serve --encoder {args.encoder}")
    convs = replay(args, serve, stub, trajectories)
    check_stats(serve, len(convs))
    check_stream_and_shutdown(serve, stub)
    check_recall_mcp(args.lam, store, check_recall(args.lam, store, convs))
    load_test(args, trajectories, work)
    print("sdk tests passed")


if __name__ == "__main__":
    main()
