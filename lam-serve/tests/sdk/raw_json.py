"""Raw item texts of a JSON request body, exactly as sent: what the
wire-level tests compare byte for byte (the SDK tests here, the real-agent
tests in lam/tests/agents). Standard library only."""

import json

DEC = json.JSONDecoder()


def skip_ws(s, i):
    while s[i] in " \t\r\n":
        i += 1
    return i


def raw_items(body, field):
    """The raw text of every item of the body's (a JSON object's) list member `field`."""
    s = body.decode() if isinstance(body, bytes) else body
    i = skip_ws(s, 0) + 1
    while True:
        i = skip_ws(s, i)
        if s[i] == "}":
            raise AssertionError(f"no {field} in the forwarded body")
        key, i = DEC.raw_decode(s, i)
        i = skip_ws(s, skip_ws(s, i) + 1)
        if key == field:
            items, i = [], i + 1
            while True:
                i = skip_ws(s, i)
                if s[i] == "]":
                    return items
                _, j = DEC.raw_decode(s, i)
                items.append(s[i:j])
                i = skip_ws(s, j)
                if s[i] == ",":
                    i += 1
        _, i = DEC.raw_decode(s, i)
        i = skip_ws(s, i)
        if s[i] == ",":
            i += 1


def identity(raw):
    """An item as the proxy's identity reads it (lam-serve canon::identity):
    `cache_control` annotations left out and a `content` that is one text
    block read as its string; what a client may rewrite from one request to
    the next without changing the item (Claude Code marks the last messages,
    writing a marked one-block message as a list and an unmarked one as a
    string). Below a tool call's `input` every member counts."""
    def walk(v, args=False):
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if k == "cache_control" and not args:
                    continue
                x = walk(x, args or k == "input")
                if k == "content" and not args and isinstance(x, list) and len(x) == 1 and isinstance(x[0], dict) \
                        and set(x[0]) == {"type", "text"} and x[0]["type"] == "text":
                    x = x[0]["text"]
                out[k] = x
            return out
        if isinstance(v, list):
            return [walk(x, args) for x in v]
        return v
    return json.dumps(walk(json.loads(raw)), sort_keys=True, ensure_ascii=False)
