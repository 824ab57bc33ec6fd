"""One action rule: the same tool calls and outputs get the same §ids through
`lam compact` of the chat log, `lam serve` (the proxy, in front of a loopback
upstream stub) and `lam.compact_messages`.

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


def through_serve(lam_program, msgs, store, tmp_path):
    up = Upstream()
    threading.Thread(target=up.serve_forever, daemon=True).start()
    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    p = subprocess.Popen([str(lam_program), "serve", "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{up.server_address[1]}",
                          "--store", str(store), "--encoder", "hashing", "--no-cache"], stderr=log)
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps({"model": "m", "messages": msgs}).encode(),
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
