"""A loopback stand-in for the Anthropic, OpenAI and Gemini APIs that
answers the real agents (Claude Code, Codex, opencode, Gemini CLI) with
scripted tool calls, so that the agent really runs its tools on a real
folder, and records every request it gets.

The script is a list of steps, each a tool the agent offers, named by role:

- `("shell", "cat app.py")`: the agent's shell tool: Claude Code's `Bash`;
  opencode's `bash`; Gemini CLI's `run_shell_command`; Codex's
  `exec_command` (or `shell_command`, `shell`, whichever it offers), or in
  Codex's code mode (a custom tool `exec` that runs JavaScript) a script
  calling `tools.exec_command`;
- `("read", "app.py")`: Claude Code's `Read`, opencode's `read`, Gemini
  CLI's `read_file` (path made absolute in the workdir); for Codex a `cat`
  through its shell tool;
- `("recall", None)`: the `lam` MCP server's `recall` tool as the agent lists
  it (Claude Code `mcp__lam__recall`; opencode `lam_recall`; Gemini CLI
  `mcp_lam_recall`; Codex the function `recall` in the namespace
  `mcp__lam`, or `tools.mcp__lam__recall` in code mode), called with the
  first `§id` of a stub the agent has sent;
- `("agent", task)`: Claude Code's `Agent` with a fresh subagent;
- `("fork", task)`: a fork that starts from the whole conversation (Claude
  Code's `Agent` with `subagent_type: "fork"`; Codex's `spawn_agent` in the
  `collaboration` namespace with `fork_turns: "all"`, offered with
  `--enable multi_agent_v2`), then for Codex `("wait", None)`: `wait_agent`.

The step answered is the number of tool results in the request's
conversation; after the last one the model says `DONE.`. A subagent's or a
fork's requests are answered from their own script (`SUBAGENT_SCRIPT`,
`FORK_SCRIPT`); a fork counts its steps from its answer to the fork call. A request that
offers no tools (a title or a quota probe) gets a plain `DONE.`.

Interactive runs (`Upstream(turns=True)`, lam/tests/agents/pty_test.py): each
typed message carries a marker `LAMTURN-k`, and the step answered is the
number of tool results plus k - 1, so a script can end a turn and go on in
the next: `("end", None)` answers the final text `DONE.` (on all three
APIs; a Gemini call then carries a `thoughtSignature`, as a Gemini 3
model's does). Steps that make the faults an interactive user meets (any script may hold them; none of
the scripts above does, so the default behaviour is unchanged):

- `("slow", seconds)`: a final text streamed a few words at a time over
  `seconds` (chunked), for a user to interrupt (Esc); a client that goes
  away is recorded as `aborted` (the event it was cut at);
- `("drop", then)`: once, a text answer of which a few events are sent
  before the connection is closed mid-stream (recorded `dropped`); the
  request repeated at the same step is answered with the step `then` (a
  step, or None for `DONE.`);
- `("fail", then)`: once, a 500 (an `api_error` / `server_error` body,
  recorded `failed`), then the step `then` for the retried request. Answers
stream as SSE (Anthropic Messages with `tool_use` blocks; OpenAI Responses
with `function_call` / `custom_tool_call` items; the Gemini API's
`models/M:streamGenerateContent?alt=sse` as `data:` lines of
GenerateContentResponse with a `functionCall` part, `:generateContent` as
one JSON, `:countTokens` with the request's count). WebSocket upgrades are
answered 426, as an HTTPS-only endpoint does.

Run alone: `scripted_upstream.py PORT_FILE RECORD WORKDIR` writes its port to
PORT_FILE and appends each request to RECORD (JSON Lines) until killed.
"""

import http.server
import json
import re
import sys
import threading
import time

SECRET_HEADERS = {"authorization", "x-api-key", "cookie"}
STUB_ID = re.compile(r"§([0-9a-f]{4,})")
SHELL_TOOLS = ["exec_command", "shell_command", "shell"]
# The `lam` MCP server's recall tool as each agent names it to the model:
# Claude Code, opencode, Gemini CLI (Codex: `recall` in namespace `mcp__lam`).
RECALL_TOOLS = ["mcp__lam__recall", "lam_recall", "mcp_lam_recall"]

SCRIPT = [
    ("shell", "cat app.py"),
    ("read", "app.py"),
    ("shell", "cat app.py"),
    ("shell", "cat app_v2.py"),
    ("shell", "ls -la"),
    ("shell", "python3 check.py"),
    ("shell", "python3 check.py"),
    ("recall", None),
]

# What changed must reach the model: a file read, edited (one line
# changed, then one line inserted: the numbers below it move) and read
# again; a check re-run whose output changes in two lines; the first read of
# a file of 40 alike rows.
CHANGES = [
    ("read", "big.py"),
    ("shell", "sed -i 's/^SCALE = 3$/SCALE = 4/' big.py"),
    ("read", "big.py"),
    ("shell", "sed -i '10i # a line inserted above line 10' big.py"),
    ("read", "big.py"),
    ("shell", "python3 check2.py"),
    ("shell", "echo 1 > state.txt"),
    ("shell", "python3 check2.py"),
    ("shell", "cat rows.py"),
    ("recall", None),
]

# With a subagent: the main conversation hands work to a fresh subagent
# (Claude Code's `Agent`), which runs its own script in a conversation of
# its own, then goes on.
SUBAGENT_TASK = "SUBAGENT-TASK: run cat app.py twice and report what you saw."
WITH_SUBAGENT = [
    ("shell", "cat app.py"),
    ("agent", SUBAGENT_TASK),
    ("shell", "cat app.py"),
    ("recall", None),
]
SUBAGENT_SCRIPT = [
    ("shell", "cat app.py"),
    ("shell", "cat app.py"),
]

# With a fork: the main conversation forks a child that starts from its
# whole history and answers the fork call itself (Claude Code: "Fork
# started ..."; Codex: "aborted" and the task as an `agent_message`), while
# the parent answers it with the child's report; then the parent goes on.
FORK_TASK = "FORK-TASK: run cat app.py and cat app_v2.py, then report."
WITH_FORK = [
    ("shell", "cat app.py"),
    ("read", "app.py"),
    ("shell", "cat app.py"),
    ("fork", FORK_TASK),
    ("shell", "cat app_v2.py"),
    ("recall", None),
]
# Codex's parent waits for its child with a call of its own.
WITH_FORK_WAIT = WITH_FORK[:4] + [("wait", None)] + WITH_FORK[4:]
FORK_SCRIPT = [
    ("shell", "cat app.py"),
    ("shell", "cat app_v2.py"),
]


def fork_child(api, body):
    """Whether a request is a fork's: Claude Code's child answers the fork
    call with "Fork started"; Codex's child gets its task as an
    `agent_message` to an agent other than `/root`."""
    if api == "messages":
        return any(isinstance(b, dict) and b.get("type") == "tool_result" and "Fork started" in json.dumps(b.get("content"))
                   for m in body.get("messages", []) if isinstance(m, dict) and isinstance(m.get("content"), list) for b in m["content"])
    return any(isinstance(it, dict) and it.get("type") == "agent_message" and it.get("recipient") != "/root" and FORK_TASK in json.dumps(it.get("content"))
               for it in body.get("input", []))


def script_step(api, body, script, results):
    """The step of `script` (the main conversation's) that answers a request
    with `results` tool results, or None when the conversation is done."""
    if api == "messages" and is_subagent(body):
        script = SUBAGENT_SCRIPT
    elif fork_child(api, body):
        results -= 1 + next(k for k, (role, _) in enumerate(script) if role == "fork")
        script = FORK_SCRIPT
    return script[results] if 0 <= results < len(script) else None


# ------------------------------------------------------------------ Anthropic

def anthropic_results(body):
    n = 0
    for m in body.get("messages", []):
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):
            n += sum(1 for b in c if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def is_subagent(body):
    """Whether a Messages request is the subagent's conversation (its task opens it)."""
    first = body.get("messages", [{}])[0].get("content")
    return SUBAGENT_TASK in json.dumps(first)


def anthropic_step(body, body_text, workdir, script):
    """(name, input) of the tool_use to answer with, or None for the final text."""
    k = anthropic_results(body)
    step = script_step("messages", body, script, k)
    if step is None:
        return None
    role, arg = step
    if role in ("agent", "fork"):
        kind = "general-purpose" if role == "agent" else "fork"
        return "Agent", {"description": "scripted " + role, "prompt": arg, "subagent_type": kind, "run_in_background": False}
    names = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
    # Claude Code's tools are `Bash` and `Read`; opencode's `bash` and `read {filePath}`.
    bash, read = ("Bash", "Read") if "Bash" in names or "bash" not in names else ("bash", "read")
    if role == "shell":
        return bash, {"command": arg, "description": "scripted step %d" % k}
    if role == "read":
        return read, {("file_path" if read == "Read" else "filePath"): "%s/%s" % (workdir, arg)}
    ids = STUB_ID.findall(body_text)
    tool = next((n for n in RECALL_TOOLS if n in names), None)
    if tool is None or not ids:
        return bash, {"command": "echo no-recall-tool-or-no-stub", "description": "scripted fallback"}
    return tool, {"id": ids[0]}


# Claude Code's own compaction: the request that asks for a summary, and
# the first request of the conversation that goes on from it.
COMPACTION = "CRITICAL: Respond with TEXT ONLY"
CONTINUED = "This session is being continued from a previous conversation"
SUMMARY = "Summary: the scripted session read files; nothing is left to do."


# opencode's: a request whose system prompt is its summarizer's; the
# conversation goes on from the summary it was answered.
OPENCODE_COMPACTION = "You are a context summarization agent"


def compaction_kind(body):
    """'compaction' for Claude Code's or opencode's request for a summary,
    'continued' for the conversation that goes on after it, else None."""
    msgs = body.get("messages") or [{}]
    if COMPACTION in json.dumps(msgs[-1]) or OPENCODE_COMPACTION in json.dumps(body.get("system")):
        return "compaction"
    if CONTINUED in json.dumps(msgs[0]) or SUMMARY in json.dumps(msgs):
        return "continued"
    return None


def anthropic_sse(block, model, seq, usage=10, text="DONE."):
    msg = {"id": "msg_scripted_%d" % seq, "type": "message", "role": "assistant", "content": [], "model": model,
           "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": usage, "output_tokens": 1}}
    ev = [("message_start", {"type": "message_start", "message": msg})]
    if block is None:
        ev.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}))
        stop = "end_turn"
    else:
        name, args = block
        start = {"type": "tool_use", "id": "toolu_scripted_%d" % seq, "name": name, "input": {}}
        ev.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}))
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)}}))
        stop = "tool_use"
    ev.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": 5}}))
    ev.append(("message_stop", {"type": "message_stop"}))
    return b"".join(f"event: {t}\ndata: {json.dumps(d)}\n\n".encode() for t, d in ev)


def anthropic_json(block, model, seq, usage=10, text="DONE."):
    content = [{"type": "text", "text": text}] if block is None else \
        [{"type": "tool_use", "id": "toolu_scripted_%d" % seq, "name": block[0], "input": block[1]}]
    return {"id": "msg_scripted_%d" % seq, "type": "message", "role": "assistant", "content": content, "model": model,
            "stop_reason": "end_turn" if block is None else "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": usage, "output_tokens": 5}}


# --------------------------------------------------------------------- OpenAI

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
    """Every tool a Responses request offers: `tools`, and Codex's `additional_tools` input items."""
    out = offered(body.get("tools", []), [])
    for it in body.get("input", []):
        if isinstance(it, dict) and it.get("type") == "additional_tools":
            offered(it.get("tools", []), out)
    return out


def responses_results(body):
    kinds = ("function_call_output", "custom_tool_call_output")
    return sum(1 for it in body.get("input", []) if isinstance(it, dict) and it.get("type") in kinds)


def shell_call(names, command, workdir):
    """(name, arguments) of a function call of the shell tool Codex offers, or
    ("exec", source) of a code-mode call."""
    if "exec" in names:
        return "exec", "const r = await tools.exec_command(%s);\ntext(r.output);" % json.dumps({"cmd": command, "workdir": workdir})
    for name in SHELL_TOOLS:
        if name == "exec_command" and name in names:
            return name, {"cmd": command, "workdir": workdir}
        if name == "shell_command" and name in names:
            return name, {"command": command, "workdir": workdir}
        if name == "shell" and name in names:
            return name, {"command": ["bash", "-lc", command], "workdir": workdir}
    raise ValueError("the request offers no shell tool: %s" % sorted(names))


def responses_step(body, body_text, workdir, script=SCRIPT):
    tools = tool_list(body)
    names = {n for _, n in tools}
    step = script_step("responses", body, script, responses_results(body))
    if step is None:
        return None
    role, arg = step
    if role in ("fork", "wait"):
        ns = next((ns for ns, n in tools if n == "spawn_agent" and ns), None)
        if ns is None:
            raise ValueError("the request offers no spawn_agent in a namespace (Codex without --enable multi_agent_v2?)")
        if role == "wait":
            return ("wait_agent", ns), {"timeout_ms": 120000}
        return ("spawn_agent", ns), {"task_name": "forktest", "message": arg, "fork_turns": "all"}
    if role == "read":
        role, arg = "shell", "cat " + arg
    if role == "shell":
        return shell_call(names, arg, workdir)
    ids = STUB_ID.findall(body_text)
    if "exec" in names and ids:
        src = "const r = await tools.mcp__lam__recall(%s);\ntext(r.content.map(c => c.text).join(''));"
        return "exec", src % json.dumps({"id": ids[0]})
    ns = next((ns for ns, n in tools if n == "recall" and ns and ns.startswith("mcp__lam")), None)
    if ns is None or not ids:
        return shell_call(names, "echo no-recall-tool-or-no-stub", workdir)
    return ("recall", ns), {"id": ids[0]}


def responses_compaction_kind(body):
    """'compaction' for Codex's remote compaction request (its last input
    item is `compaction_trigger`), 'continued' for a history rebuilt around
    the `compaction` item that answered it, else None."""
    items = [it for it in body.get("input", []) if isinstance(it, dict)]
    if items and items[-1].get("type") == "compaction_trigger":
        return "compaction"
    if any(it.get("type") == "compaction" for it in items):
        return "continued"
    return None


def responses_sse(call, model, seq, usage=10, compaction=False):
    base = {"id": "resp_scripted_%d" % seq, "object": "response", "created_at": 1, "model": model,
            "status": "in_progress", "output": []}
    ev = [{"type": "response.created", "response": base}]
    if compaction:
        # Codex keeps the item and sends it back; only the real service reads it.
        item = {"type": "compaction", "id": "cmp_scripted_%d" % seq, "encrypted_content": "c2NyaXB0ZWQgc3VtbWFyeQ=="}
        ev.append({"type": "response.output_item.added", "output_index": 0, "item": item})
    elif call is None:
        mid = "msg_scripted_%d" % seq
        item = {"type": "message", "id": mid, "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "DONE.", "annotations": []}]}
        ev.append({"type": "response.output_item.added", "output_index": 0, "item": dict(item, status="in_progress", content=[])})
        ev.append({"type": "response.output_text.delta", "item_id": mid, "output_index": 0, "content_index": 0, "delta": "DONE."})
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
    usage = {"input_tokens": usage, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": usage + 5}
    ev.append({"type": "response.completed", "response": dict(base, status="completed", output=[item], usage=usage)})
    for i, e in enumerate(ev):
        e["sequence_number"] = i
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in ev)



# --------------------------------------------------------------------- Gemini

# Gemini CLI's tools (`run_shell_command`, `read_file`) and its own
# compaction, of two kinds: compression, two `:generateContent` calls whose
# last part asks for a `<state_snapshot>`, then a history that opens with
# the snapshot and the model's "Got it. Thanks for the additional context!";
# and tool-output masking, older `functionResponse` outputs replaced in
# place by a `<tool_output_masked>` preview (no request of its own).
GEMINI_COMPACTION = "<state_snapshot>"
GEMINI_CONTINUED = "Got it. Thanks for the additional context!"
GEMINI_MASKED = "<tool_output_masked>"
GEMINI_SUMMARY = "<state_snapshot>\n" + SUMMARY + "\n</state_snapshot>"
# What a utility call without tools gets (the routing classifier asks for
# this JSON; the others read the text).
GEMINI_UTILITY = '{"complexity_reasoning": "Scripted.", "complexity_score": 10}'


def gemini_parts(body):
    for c in body.get("contents", []):
        for p in (c.get("parts") if isinstance(c, dict) else None) or []:
            if isinstance(p, dict):
                yield p


def gemini_results(body):
    return sum(1 for p in gemini_parts(body) if "functionResponse" in p)


def gemini_tools(body):
    """The names of the function declarations a request offers."""
    return [f.get("name") for t in body.get("tools") or [] if isinstance(t, dict)
            for f in t.get("functionDeclarations") or [] if isinstance(f, dict)]


def gemini_masked(body):
    """How many of a request's tool outputs Gemini CLI has masked."""
    return sum(1 for p in gemini_parts(body) if GEMINI_MASKED in json.dumps(p.get("functionResponse", "")))


def gemini_compaction_kind(body):
    """'compaction' for Gemini CLI's request for a snapshot (its last part),
    'continued' for the history rebuilt around it or holding masked tool
    outputs, else None."""
    parts = list(gemini_parts(body))
    if parts and GEMINI_COMPACTION in str(parts[-1].get("text", "")):
        return "compaction"
    if any(GEMINI_CONTINUED == p.get("text") for p in parts) or gemini_masked(body):
        return "continued"
    return None


def gemini_step(body, body_text, workdir, script):
    """(name, args) of the functionCall to answer with, or None for the final text."""
    k = gemini_results(body)
    step = script_step("gemini", body, script, k)
    if step is None:
        return None
    role, arg = step
    names = gemini_tools(body)
    if role == "read" and "read_file" in names:
        return "read_file", {"file_path": "%s/%s" % (workdir, arg)}
    if role == "read":
        role, arg = "shell", "cat " + arg
    ids = STUB_ID.findall(body_text)
    if role == "recall" and ids and "mcp_lam_recall" in names:
        return "mcp_lam_recall", {"id": ids[0]}
    if role == "recall":
        role, arg = "shell", "echo no-recall-tool-or-no-stub"
    if role != "shell":
        raise ValueError("Gemini CLI: no scripted answer for the step %r" % (step,))
    return "run_shell_command", {"command": arg, "description": "scripted step %d" % k}


def gemini_response(call, seq, usage=10, text="DONE."):
    """A GenerateContentResponse: one functionCall part, or a text part."""
    part = {"text": text} if call is None else {"functionCall": {"name": call[0], "args": call[1]}}
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": usage, "candidatesTokenCount": 5, "totalTokenCount": usage + 5},
            "modelVersion": "scripted", "responseId": "resp_scripted_%d" % seq}


def gemini_sse(call, seq, usage=10, text="DONE."):
    """The answer of `:streamGenerateContent?alt=sse`: the text in two
    chunks, or the call in one, then the finish with the usage."""
    r = gemini_response(call, seq, usage, text)
    if call is None and len(text) > 1:
        head = gemini_response(None, seq, usage, text[:len(text) // 2])
        del head["candidates"][0]["finishReason"], head["usageMetadata"]
        r["candidates"][0]["content"]["parts"][0]["text"] = text[len(text) // 2:]
        return b"".join(b"data: " + json.dumps(x).encode() + b"\r\n\r\n" for x in (head, r))
    return b"data: " + json.dumps(r).encode() + b"\r\n\r\n"


# ------------------------------------------------------------ interactive runs

TURN = re.compile(r"LAMTURN-(\d+)")
FAULTS = ("end", "slow", "drop", "fail")
SLOW_TEXT = "This answer streams slowly, a few words at a time, so that it can be interrupted. "


def slow_pieces(api, n):
    """The pieces of a slow answer: SLOW_TEXT again and again; for Gemini
    CLI, whose loop detection stops an answer that repeats a 50-character
    stretch (and asks the user about it), SLOW_TEXT once and then pieces
    that differ in every stretch."""
    if api != "gemini":
        return [SLOW_TEXT] * n
    return [SLOW_TEXT] + ["Then part %d, counted %d, and %d more. " % (i, i * 7919 % 10007, i * 104729 % 9973) for i in range(1, n)]


def turn_index(api, body, body_text):
    """(step index, turn) of a request in turns mode: the tool results it
    holds plus the turns before the last marker `LAMTURN-k` typed."""
    turns = [int(k) for k in TURN.findall(body_text)]
    k = max(turns) if turns else 1
    return api_results(api, body) + k - 1, k


def api_results(api, body):
    """The tool results a request's conversation holds."""
    return {"messages": anthropic_results, "responses": responses_results, "gemini": gemini_results}[api](body)


def text_events(api, model, seq, pieces, usage=10):
    """A final text answer streamed as one event per piece (SSE), in order."""
    if api == "gemini":
        out = []
        for i, p in enumerate(pieces):
            r = gemini_response(None, seq, usage, p)
            if i < len(pieces) - 1:
                del r["candidates"][0]["finishReason"], r["usageMetadata"]
            out.append(b"data: " + json.dumps(r).encode() + b"\r\n\r\n")
        return out
    if api == "messages":
        msg = {"id": "msg_scripted_%d" % seq, "type": "message", "role": "assistant", "content": [], "model": model,
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": usage, "output_tokens": 1}}
        ev = [("message_start", {"type": "message_start", "message": msg}),
              ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
        ev += [("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}) for p in pieces]
        ev += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 5}}),
               ("message_stop", {"type": "message_stop"})]
        return [f"event: {t}\ndata: {json.dumps(d)}\n\n".encode() for t, d in ev]
    base = {"id": "resp_scripted_%d" % seq, "object": "response", "created_at": 1, "model": model, "status": "in_progress", "output": []}
    mid = "msg_scripted_%d" % seq
    item = {"type": "message", "id": mid, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "".join(pieces), "annotations": []}]}
    ev = [{"type": "response.created", "response": base},
          {"type": "response.output_item.added", "output_index": 0, "item": dict(item, status="in_progress", content=[])}]
    ev += [{"type": "response.output_text.delta", "item_id": mid, "output_index": 0, "content_index": 0, "delta": p} for p in pieces]
    usage = {"input_tokens": usage, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": usage + 5}
    ev += [{"type": "response.output_item.done", "output_index": 0, "item": item},
           {"type": "response.completed", "response": dict(base, status="completed", output=[item], usage=usage)}]
    for i, e in enumerate(ev):
        e["sequence_number"] = i
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in ev]


# --------------------------------------------------------------------- server

class Upstream(http.server.ThreadingHTTPServer):
    """The scripted upstream on 127.0.0.1 (a free port); `seen` holds every
    request: method, path, headers (no secrets), body text, when it came
    (`at`, Unix seconds) and the seconds the handler took (parse to answer
    written)."""
    daemon_threads = True

    def __init__(self, workdir, record=None, script=SCRIPT, honest=None, turns=False):
        super().__init__(("127.0.0.1", 0), Handler)
        # Interactive runs: steps counted across typed turns (`LAMTURN-k`).
        self.turns = turns
        # The (api, step, turn) of each fault already made (`drop`, `fail` happen once).
        self.faulted = set()
        self.workdir = workdir
        # Report honest `usage`: the input as the request's bytes / `honest`
        # (bytes per token; else a constant 10); answer Claude Code's own
        # compaction with a summary.
        self.honest = honest
        self.script = script
        self.record = record
        self.lock = threading.Lock()
        self.seen = []

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]

    def log(self, entry):
        with self.lock:
            entry["seq"] = len(self.seen) + 1
            self.seen.append(entry)
            if self.record:
                with open(self.record, "a") as f:
                    f.write(json.dumps(entry) + "\n")
            return entry

    def start(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def entry(self, raw):
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in SECRET_HEADERS}
        return self.server.log({"method": self.command, "path": self.path, "headers": headers,
                                "body": raw.decode("utf-8", "replace"), "handler_s": 0.0,
                                "at": time.time()})

    def send(self, code, ctype, data):
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self):
        t0 = time.perf_counter()
        e = self.entry(b"")
        if self.headers.get("upgrade", "").lower() == "websocket":
            self.send(426, "application/json", b'{"error":{"type":"websocket_unsupported","message":"scripted upstream: HTTPS only"}}')
        else:
            self.send(404, "application/json", b'{"error":{"type":"not_found","message":"scripted upstream"}}')
        e["handler_s"] = time.perf_counter() - t0

    def do_HEAD(self):
        self.entry(b"")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        t0 = time.perf_counter()
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        e = self.entry(raw)
        self.answer(raw, e["seq"], e)
        e["handler_s"] = time.perf_counter() - t0

    def answer(self, raw, seq, entry=None):
        path = self.path.split("?")[0]
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        text, model, wd = raw.decode("utf-8", "replace"), body.get("model", "scripted"), self.server.workdir
        if path.endswith("/messages/count_tokens"):
            return self.send(200, "application/json", b'{"input_tokens":100}')
        if ":" in path.rsplit("/", 1)[-1]:
            return self.gemini(path.rsplit(":", 1)[1], raw, body, text, seq, entry)
        api = "messages" if path.endswith("/messages") else "responses" if path.endswith("/responses") else None
        tools = api == "messages" and body.get("tools") or api == "responses" and tool_list(body)
        if api and tools and (self.server.turns or any(r in FAULTS for r, _ in self.server.script)):
            return self.interactive(api, body, text, model, seq, entry)
        if path.endswith("/messages"):
            usage = int(len(raw) / self.server.honest) if self.server.honest else 10
            kind = compaction_kind(body) if self.server.honest else None
            if entry is not None:
                entry["usage"], entry["compaction"] = usage, kind == "compaction"
            block = anthropic_step(body, text, wd, self.server.script) if body.get("tools") and kind is None else None
            say = SUMMARY if kind == "compaction" else "DONE."
            if not body.get("stream"):
                return self.send(200, "application/json", json.dumps(anthropic_json(block, model, seq, usage, say)).encode())
            return self.send(200, "text/event-stream", anthropic_sse(block, model, seq, usage, say))
        if path.endswith("/responses"):
            usage = int(len(raw) / self.server.honest) if self.server.honest else 10
            kind = responses_compaction_kind(body) if self.server.honest else None
            if entry is not None:
                entry["usage"], entry["compaction"] = usage, kind == "compaction"
            call = responses_step(body, text, wd, self.server.script) if tool_list(body) and kind is None else None
            return self.send(200, "text/event-stream", responses_sse(call, model, seq, usage, kind == "compaction"))
        self.send(404, "application/json", b'{"error":{"type":"not_found","message":"scripted upstream"}}')

    def gemini(self, method, raw, body, text, seq, entry):
        """Answer the Gemini API (`models/M:streamGenerateContent?alt=sse`,
        `:generateContent`, `:countTokens`): a conversation's request by the
        script, Gemini CLI's compression with a snapshot, a utility call
        without tools (the routing classifier) with its JSON."""
        usage = int(len(raw) / self.server.honest) if self.server.honest else 10
        if method == "countTokens":
            return self.send(200, "application/json", json.dumps({"totalTokens": usage}).encode())
        if method not in ("streamGenerateContent", "generateContent"):
            return self.send(404, "application/json", b'{"error":{"code":404,"status":"NOT_FOUND","message":"scripted upstream"}}')
        kind = gemini_compaction_kind(body) if self.server.honest else None
        if entry is not None:
            entry["usage"], entry["compaction"], entry["masked"] = usage, kind == "compaction", gemini_masked(body)
        tools = gemini_tools(body)
        if tools and kind is None and (self.server.turns or any(r in FAULTS for r, _ in self.server.script)):
            return self.interactive("gemini", body, text, body.get("model", "scripted"), seq, entry, method)
        call = gemini_step(body, text, self.server.workdir, self.server.script) if tools and kind is None else None
        say = GEMINI_SUMMARY if kind == "compaction" else "DONE." if tools else GEMINI_UTILITY
        if method == "generateContent":
            return self.send(200, "application/json", json.dumps(gemini_response(call, seq, usage, say)).encode())
        return self.send(200, "text/event-stream", gemini_sse(call, seq, usage, say))

    def interactive(self, api, body, text, model, seq, entry, method=None):
        """Answer a conversation's request in turns mode, or at a fault step
        (`method`: the Gemini API's, `streamGenerateContent` or
        `generateContent`)."""
        script, wd = self.server.script, self.server.workdir
        if self.server.turns:
            idx, k = turn_index(api, body, text)
        else:
            idx = api_results(api, body)
            k = 1
        step = script[idx] if 0 <= idx < len(script) else None
        role = step[0] if step else None
        if entry is not None:
            entry["turn"], entry["step"], entry["role"] = k, idx, role or "end"
        if role in ("drop", "fail"):
            with self.server.lock:
                again = (api, idx, k) in self.server.faulted
                self.server.faulted.add((api, idx, k))
            if not again:
                if entry is not None:
                    entry["dropped" if role == "drop" else "failed"] = True
                if role == "fail":
                    err = {"type": "error", "error": {"type": "api_error", "message": "scripted upstream: a failure, once"}} if api == "messages" \
                        else {"error": {"code": 500, "message": "scripted upstream: a failure, once", "status": "INTERNAL"}} if api == "gemini" \
                        else {"error": {"type": "server_error", "message": "scripted upstream: a failure, once", "code": "server_error"}}
                    return self.send(500, "application/json", json.dumps(err).encode())
                return self.stream(text_events(api, model, seq, ["This answer ", "is cut ", "by a dropped ", "connection ", "here."]), 0.2, entry, drop_after=3)
            step = step[1]
            role = step[0] if step else None
            if entry is not None:
                entry["role"] = role or "end"
        if role == "slow":
            n = max(1, int(step[1] / 0.25))
            return self.stream(text_events(api, model, seq, slow_pieces(api, n)), 0.25, entry)
        if role in (None, "end"):
            block = None
        elif api == "gemini":
            block = gemini_step(body, text, wd, [step] * (gemini_results(body) + 1))
        elif api == "messages":
            block = anthropic_step(body, text, wd, [step] * (anthropic_results(body) + 1))
        else:
            block = responses_step(body, text, wd, [step] * (responses_results(body) + 1))
        if api == "gemini":
            if block is None:
                r = gemini_response(None, seq)
                chunks = gemini_sse(None, seq)
            else:
                # A call carries a thought signature, as a Gemini 3 model's
                # does: without one Gemini CLI signs the calls of the turn
                # in progress itself (`skip_thought_signature_validator`)
                # and drops that at the next typed message, an earlier item
                # changed that a real model's answers never make it change.
                r = gemini_response(block, seq)
                r["candidates"][0]["content"]["parts"][0]["thoughtSignature"] = "c2NyaXB0ZWQgc2lnbmF0dXJl"
                chunks = b"data: " + json.dumps(r).encode() + b"\r\n\r\n"
            if method == "generateContent":
                return self.send(200, "application/json", json.dumps(r).encode())
            return self.send(200, "text/event-stream", chunks)
        if api == "messages":
            if not body.get("stream"):
                return self.send(200, "application/json", json.dumps(anthropic_json(block, model, seq)).encode())
            return self.send(200, "text/event-stream", anthropic_sse(block, model, seq))
        return self.send(200, "text/event-stream", responses_sse(block, model, seq))

    def stream(self, events, delay, entry, drop_after=None):
        """Events sent chunked, `delay` seconds apart; with `drop_after`, the
        connection is closed after that many events, mid-stream."""
        import socket
        self.close_connection = True
        i = -1
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for i, ev in enumerate(events):
                if drop_after is not None and i == drop_after:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
                time.sleep(delay)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            if entry is not None:
                entry["aborted"] = i


def main():
    port_file, record, workdir = sys.argv[1:4]
    up = Upstream(workdir, record)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(up.server_address[1]))
    import os
    os.replace(port_file + ".tmp", port_file)
    up.serve_forever()


if __name__ == "__main__":
    main()
