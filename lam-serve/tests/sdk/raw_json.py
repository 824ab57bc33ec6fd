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
