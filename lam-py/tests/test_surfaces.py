"""One action rule: the same tool calls and outputs get the same §ids through
`lam compact` of the chat log, `lam serve` (the proxy, in front of a loopback
upstream stub) and `lam.compact_messages`; and for Claude Code and Codex,
through `lam compact` of the transcript, `lam serve` given the conversation
as the agent sends it, `lam replay` and `lam.Session`.

An observation's id hashes its action and its bytes, so the three surfaces
agree only if they name every call the same way (lam_core::action). The
conversation has what used to split them: two calls answered by separate
results, JSON arguments with non-ASCII text and unsorted keys, a repeated
output, and a result whose call id matches no call.
"""

import http.server
import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import lam


def conversation():
    call = lambda i, name, args: {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
    listing = "README.md\nsrc\ntests\n"
    source = "".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(40))
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": None, "tool_calls": [call(1, "bash", '{"command": "ls"}'), call(2, "read", '{"path": "src/app.py", "note": "é ü"}')]},
        {"role": "tool", "tool_call_id": "call_1", "content": listing},
        {"role": "tool", "tool_call_id": "call_2", "content": source},
        {"role": "assistant", "content": "Again.", "tool_calls": [call(3, "read", '{"path":"src/app.py","note":"é ü"}')]},
        {"role": "tool", "tool_call_id": "call_3", "content": source},
        {"role": "assistant", "content": None, "tool_calls": [call(4, "bash", '{"command": "ls"}')]},
        {"role": "tool", "tool_call_id": "call_9", "content": listing + "notes.txt\n"},
    ]


def listed(lam_program, store):
    """(full id, bytes) of every observation of the store's one session, in order."""
    run = lambda *a: subprocess.run([str(lam_program), "recall", "--store", str(store), "--list", *a], check=True, capture_output=True, text=True).stdout
    sessions = [line.split("\t")[0] for line in run().splitlines()]
    assert len(sessions) == 1, f"{store}: expected one session, got {sessions}"
    return [tuple(line.split("\t")[:2]) for line in run("--session", sessions[0]).splitlines()]


class Upstream(http.server.ThreadingHTTPServer):
    """A loopback stand-in for the LLM: any POST gets one chat completion."""

    def __init__(self):
        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["content-length"]))
                body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                   "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        super().__init__(("127.0.0.1", 0), H)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def through_serve(lam_program, msgs, store, tmp_path, path="/v1/chat/completions", body=None):
    up = Upstream()
    threading.Thread(target=up.serve_forever, daemon=True).start()
    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    p = subprocess.Popen([str(lam_program), "serve", "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{up.server_address[1]}",
                          "--store", str(store), "--encoder", "hashing", "--no-cache"], stderr=log)
    try:
        body = body or {"model": "m", "messages": msgs}
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        for _ in range(300):
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    assert r.status == 200
                break
            except urllib.error.URLError:
                assert p.poll() is None, f"lam serve exited: see {log.name}"
                time.sleep(0.1)
    finally:
        p.terminate()
        p.wait(60)
        up.shutdown()


def test_same_ids_through_compact_serve_and_python(lam_program, tmp_path):
    msgs = conversation()
    log = tmp_path / "chat.json"
    log.write_text(json.dumps(msgs, ensure_ascii=False))
    subprocess.run([str(lam_program), "compact", "--encoder", "hashing", "--no-cache", "--store", str(tmp_path / "compact"), str(log)],
                   check=True, capture_output=True)
    lam.compact_messages(msgs, encoder="hashing", cache=False, store=str(tmp_path / "python"), session="python")
    through_serve(lam_program, msgs, tmp_path / "serve", tmp_path)
    compact = listed(lam_program, tmp_path / "compact")
    assert len(compact) == 4
    assert listed(lam_program, tmp_path / "python") == compact
    assert listed(lam_program, tmp_path / "serve") == compact
    # And the reader names each result by the call it answers.
    actions = [r.action for r in lam.read_trajectory(log)]
    assert actions == ['bash({"command": "ls"})', 'read({"path": "src/app.py", "note": "é ü"})', 'read({"path":"src/app.py","note":"é ü"})',
                       'bash({"command": "ls"})']


def claude_code_transcript():
    """A Claude Code transcript (`~/.claude/projects`): the message of every
    line is what Claude Code sends on /v1/messages. An MCP call, a result in
    two text blocks, a repeated command."""
    log = "".join(f"{i} passed\n" for i in range(30))
    lines, n = [], 0

    def line(role, content):
        nonlocal n
        n += 1
        lines.append({"type": role, "sessionId": "cc-surfaces", "uuid": f"u{n}", "message": {"role": role, "content": content}})

    def call(k, name, input, result):
        line("assistant", [{"type": "text", "text": f"Step {k}."}, {"type": "tool_use", "id": f"toolu_{k}", "name": name, "input": input}])
        line("user", [{"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": result}])

    line("user", "Fix the failing test.")
    call(1, "Bash", {"command": "pytest -q", "description": "Run the tests"}, log)
    call(2, "Glob", {"pattern": "tests/**/*.py"}, [{"type": "text", "text": "tests/test_a.py"}, {"type": "text", "text": "tests/test_b.py"}])
    call(3, "mcp__lam__recall", {"id": "0123abcd"}, [{"type": "text", "text": log}])
    call(4, "Bash", {"command": "pytest -q", "description": "Run the tests"}, log)
    return lines, {"model": "claude-opus-4-6", "max_tokens": 64, "messages": [l["message"] for l in lines]}, "/v1/messages"


def codex_rollout():
    """A Codex rollout (`~/.codex/sessions`): its response items are the
    `input` items Codex sends on /v1/responses. Arguments as the model wrote
    them, an MCP call in its namespace, a code-mode `exec` whose output is
    two text parts, a repeated command."""
    log = "".join(f"{i} passed\n" for i in range(30))
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]}]

    def pair(k, call, output, out_type="function_call_output"):
        items.append({**call, "call_id": f"call_{k}"})
        items.append({"type": out_type, "call_id": f"call_{k}", "output": output})

    pair(1, {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "pytest -q", "workdir": "/repo"}'}, log)
    pair(2, {"type": "function_call", "namespace": "mcp__lam", "name": "recall", "arguments": '{"id":"0123abcd"}'}, log[:40])
    script = 'const r = await tools.exec_command({"cmd": "ls tests", "workdir": "/repo"});\ntext(r.output);'
    parts = [{"type": "input_text", "text": "Script completed\nWall time: 0.1 seconds\nOutput:\n"}, {"type": "input_text", "text": "test_a.py\ntest_b.py\n"}]
    pair(3, {"type": "custom_tool_call", "name": "exec", "input": script}, parts, "custom_tool_call_output")
    pair(4, {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "pytest -q", "workdir": "/repo"}'}, log)
    lines = [{"timestamp": "t", "type": "session_meta", "payload": {"id": "cx-surfaces"}}]
    lines += [{"timestamp": "t", "type": "response_item", "payload": it} for it in items]
    return lines, {"model": "gpt-5-codex", "instructions": "You are Codex.", "input": items}, "/v1/responses"


def test_agents_same_ids_through_compact_serve_replay_and_python(lam_program, tmp_path):
    for name, (lines, body, route) in [("claude", claude_code_transcript()), ("codex", codex_rollout())]:
        d = tmp_path / name
        d.mkdir()
        f = d / "transcript.jsonl"
        f.write_text("".join(json.dumps(l) + "\n" for l in lines))
        flags = ["--encoder", "hashing", "--no-cache"]
        subprocess.run([str(lam_program), "compact", *flags, "--store", str(d / "compact"), str(f)], check=True, capture_output=True)
        subprocess.run([str(lam_program), "replay", *flags, "--store", str(d / "replay"), "--json", str(f)], check=True, capture_output=True)
        through_serve(lam_program, None, d / "serve", d, route, body)
        (t,) = lam.read_trajectories(f)
        s = lam.Session(encoder="hashing", cache=False, store=str(d / "python"), session="python")
        for r in t.records:
            s.admit(r.action, r.observation)
        s.close()
        compact = listed(lam_program, d / "compact")
        assert len(compact) == 4, (name, compact)  # the repeated command is one observation
        for surface in ["replay", "serve", "python"]:
            assert listed(lam_program, d / surface) == compact, (name, surface)
        actions = [r.action for r in t.records]
        assert 'mcp__lam__recall({"id":"0123abcd"})' in actions, actions
