"""A loopback stand-in for the Anthropic and OpenAI APIs that answers real
agents (Claude Code, Codex) with scripted tool calls, so the agent really runs
its tools on a real folder, and records every request it receives.

The script is a list of steps; each step is a tool the agent offers, named by
role, not by the agent's own name for it:

- `("shell", "cat app.py")`: the agent's shell tool (Claude Code `Bash`; Codex
  whichever of `shell`, `shell_command`, `exec_command`, `local_shell` it
  offers, with that tool's argument shape);
- `("read", "app.py")`: Claude Code's `Read` (file path made absolute in the
  workdir); for Codex a `cat` through the shell tool;
- `("recall", None)`: the `lam` MCP server's recall tool as the agent lists it
  (Claude Code `mcp__lam__recall`, Codex `mcp__lam__recall` or `lam__recall`),
  called with the first `§id` found in a stub the agent sent so far.

The step to answer is the number of tool results in the request's
conversation; once the script is done the model says `DONE.`. Requests that
are not the agent's main conversation (no tools offered, e.g. a title or a
quota probe) get a short plain answer. Every request is appended to
`RECORD` (JSON Lines: method, path, headers without secrets, body as text).

usage: scripted_upstream.py PORT_FILE RECORD WORKDIR
Writes the port it listens on to PORT_FILE, then serves until killed.
"""

import http.server
import json
import re
import sys
import threading

SECRET_HEADERS = {"authorization", "x-api-key", "cookie"}
STUB_ID = re.compile(r"§([0-9a-f]{4,})")

SCRIPT = [
    ("shell", "cat app.py"),
    ("read", "app.py"),
    ("shell", "cat app.py"),
    ("shell", "ls -la"),
    ("shell", "python3 check.py"),
    ("shell", "python3 check.py"),
    ("recall", None),
]


class State:
    def __init__(self, record, workdir):
        self.record = record
        self.workdir = workdir
        self.lock = threading.Lock()
        self.n = 0

    def log(self, entry):
        with self.lock:
            self.n += 1
            entry["seq"] = self.n
            with open(self.record, "a") as f:
                f.write(json.dumps(entry) + "\n")
            return self.n


# ------------------------------------------------------------------ Anthropic

def anthropic_results(body):
    n = 0
    for m in body.get("messages", []):
        c = m.get("content")
        if isinstance(c, list):
            n += sum(1 for b in c if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def stub_ids(body_text):
    return STUB_ID.findall(body_text)


def anthropic_step(body, body_text, workdir):
    """The tool_use block to answer with, or None for the final text."""
    tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    k = anthropic_results(body)
    if k >= len(SCRIPT):
        return None
    role, arg = SCRIPT[k]
    if role == "shell":
        return "Bash", {"command": arg, "description": "scripted step %d" % k}
    if role == "read":
        return "Read", {"file_path": "%s/%s" % (workdir, arg)}
    name = next((t for t in sorted(tools) if t.endswith("lam__recall")), None)
    ids = stub_ids(body_text)
    if name is None or not ids:
        return "Bash", {"command": "echo no-recall-tool-or-id", "description": "scripted fallback"}
    return name, {"id": ids[0]}


def anthropic_sse(block, model, seq):
    ev = []
    msg = {"id": "msg_scripted_%d" % seq, "type": "message", "role": "assistant", "content": [], "model": model,
           "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    ev.append(("message_start", {"type": "message_start", "message": msg}))
    if block is None:
        ev.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "DONE."}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        stop = "end_turn"
    else:
        name, args = block
        tid = "toolu_scripted_%d" % seq
        ev.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "tool_use", "id": tid, "name": name, "input": {}}}))
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        stop = "tool_use"
    ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 5}}))
    ev.append(("message_stop", {"type": "message_stop"}))
    return b"".join(f"event: {t}\ndata: {json.dumps(d)}\n\n".encode() for t, d in ev)


# --------------------------------------------------------------------- OpenAI

SHELL_TOOLS = ["shell_command", "shell", "exec_command", "local_shell"]


def offered(tools, out, namespace=None):
    """(namespace, name) of each tool in a `tools` list, namespaces opened."""
    for t in tools:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            offered(t.get("tools", []), out, t.get("name"))
        else:
            out.append((namespace, t.get("name") or t.get("type")))
    return out


def tool_list(body):
    """Every tool the request offers: `tools`, and Codex's `additional_tools` input items."""
    out = offered(body.get("tools", []), [])
    for it in body.get("input", []):
        if isinstance(it, dict) and it.get("type") == "additional_tools":
            offered(it.get("tools", []), out)
    return out


def tool_names(body):
    """Tool names as the model calls them: plain, or `NAMESPACE__NAME` for MCP namespaces."""
    return [name if not ns or not ns.startswith("mcp__") else ns.rstrip("_") + "__" + name for ns, name in tool_list(body)]


def responses_results(body):
    items = body.get("input", [])
    return sum(1 for it in items if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output"))


def shell_call(tools, command, workdir):
    """A call of the shell tool Codex offers: (name, arguments) of a function
    call, or (name, source) of a custom tool call for code mode's `exec`."""
    if "exec" in tools:
        js = "const r = await tools.exec_command(%s);\ntext(r.output);" % json.dumps({"cmd": command, "workdir": workdir})
        return "exec", js
    for name in SHELL_TOOLS:
        if name not in tools:
            continue
        if name == "shell_command":
            return name, {"command": command, "workdir": workdir}
        if name == "shell":
            return name, {"command": ["bash", "-lc", command], "workdir": workdir}
        if name == "exec_command":
            return name, {"cmd": command, "workdir": workdir}
        if name == "local_shell":
            return None
    return None


def responses_step(body, body_text, workdir):
    tools = tool_names(body)
    k = responses_results(body)
    if k >= len(SCRIPT):
        return None
    role, arg = SCRIPT[k]
    if role == "read":
        role, arg = "shell", "cat " + arg
    if role == "shell":
        return shell_call(tools, arg, workdir)
    ids = stub_ids(body_text)
    if "exec" in tools and ids:
        js = "const r = await tools.mcp__lam__recall(%s);\ntext(r.content.map(c => c.text).join(''));" % json.dumps({"id": ids[0]})
        return "exec", js
    ns = next((ns for ns, n in tool_list(body) if n == "recall" and ns and ns.startswith("mcp__lam")), None)
    if ns is None or not ids:
        return shell_call(tools, "echo no-recall-tool-or-id", workdir)
    return ("recall", ns), {"id": ids[0]}


def responses_sse(call, model, seq):
    rid = "resp_scripted_%d" % seq
    base = {"id": rid, "object": "response", "created_at": 1, "model": model, "status": "in_progress", "output": []}
    ev = [{"type": "response.created", "response": base}]
    if call is None:
        item = {"type": "message", "id": "msg_scripted_%d" % seq, "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "DONE.", "annotations": []}]}
        ev.append({"type": "response.output_item.added", "output_index": 0, "item": dict(item, status="in_progress", content=[])})
        ev.append({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": "DONE."})
    else:
        name, args = call
        cid = "call_scripted_%d" % seq
        if isinstance(args, str):
            item = {"type": "custom_tool_call", "id": "ctc_" + cid, "call_id": cid, "name": name, "input": args, "status": "completed"}
        else:
            item = {"type": "function_call", "id": "fc_" + cid, "call_id": cid, "name": name, "arguments": json.dumps(args), "status": "completed"}
            if isinstance(name, tuple):
                item["name"], item["namespace"] = name
        ev.append({"type": "response.output_item.added", "output_index": 0, "item": dict(item, status="in_progress")})
    ev.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    done = dict(base, status="completed", output=[item],
                usage={"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                       "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15})
    ev.append({"type": "response.completed", "response": done})
    for i, e in enumerate(ev):
        e["sequence_number"] = i
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in ev)


# --------------------------------------------------------------------- server

def make_handler(state):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def body(self):
            n = int(self.headers.get("content-length") or 0)
            return self.rfile.read(n) if n else b""

        def record(self, raw):
            headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in SECRET_HEADERS}
            return state.log({"method": self.command, "path": self.path, "headers": headers,
                              "body": raw.decode("utf-8", "replace")})

        def send(self, code, ctype, data):
            self.send_response(code)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.record(b"")
            if self.headers.get("upgrade", "").lower() == "websocket":
                # The real APIs speak WebSocket here; lam must never pass it through (it would bypass compaction).
                return self.send(426, "application/json", b'{"error":{"type":"websocket_unsupported","message":"scripted upstream: HTTPS only"}}')
            self.send(404, "application/json", b'{"error":{"type":"not_found","message":"scripted upstream"}}')

        def do_HEAD(self):
            self.record(b"")
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self):
            raw = self.body()
            seq = self.record(raw)
            path = self.path.split("?")[0]
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            text = raw.decode("utf-8", "replace")
            model = body.get("model", "scripted")
            if path.endswith("/messages/count_tokens"):
                return self.send(200, "application/json", b'{"input_tokens":100}')
            if path.endswith("/messages"):
                block = anthropic_step(body, text, state.workdir) if body.get("tools") else None
                data = anthropic_sse(block, model, seq)
                if not body.get("stream"):
                    content = [{"type": "text", "text": "DONE."}] if block is None else \
                        [{"type": "tool_use", "id": "toolu_scripted_%d" % seq, "name": block[0], "input": block[1]}]
                    msg = {"id": "msg_scripted_%d" % seq, "type": "message", "role": "assistant", "content": content, "model": model,
                           "stop_reason": "end_turn" if block is None else "tool_use", "stop_sequence": None,
                           "usage": {"input_tokens": 10, "output_tokens": 5}}
                    return self.send(200, "application/json", json.dumps(msg).encode())
                return self.send(200, "text/event-stream", data)
            if path.endswith("/responses"):
                call = responses_step(body, text, state.workdir) if tool_names(body) else None
                return self.send(200, "text/event-stream", responses_sse(call, model, seq))
            self.send(404, "application/json", b'{"error":{"type":"not_found","message":"scripted upstream"}}')

    return H


def main():
    port_file, record, workdir = sys.argv[1:4]
    state = State(record, workdir)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.replace(port_file + ".tmp", port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
