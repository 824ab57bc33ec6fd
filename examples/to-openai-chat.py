#!/usr/bin/env python3
"""Convert a lam trajectory JSONL file into an OpenAI chat-completions message
list (assistant tool_calls + role: tool results), the export format most agent
frameworks offer. Used to make examples/edit-session.openai.json from
examples/edit-session.jsonl. Non-UTF-8 observations are decoded with
replacement characters, as a chat export would carry them.

usage: python3 examples/to-openai-chat.py IN.jsonl OUT.json
"""
import base64
import json
import sys


def main(src, dst):
    msgs = [
        {"role": "system", "content": "You are a coding agent with a bash tool."},
        {"role": "user", "content": "Fix the failing tests in this repository."},
    ]
    for line in open(src, encoding="utf-8"):
        r = json.loads(line)
        call = f"call_{r['index']:03d}"
        msgs.append({
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call, "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"command": r["action"]})}}],
        })
        if "observation" in r:
            obs = r["observation"]
        else:
            obs = base64.b64decode(r["observation_b64"]).decode("utf-8", errors="replace")
        msgs.append({"role": "tool", "tool_call_id": call, "content": obs})
    msgs.append({"role": "assistant", "content": "The tests pass now."})
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(msgs, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
