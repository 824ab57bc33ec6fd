"""`lam mcp` through the official `mcp` Python SDK (run by scripts/test-mcp.sh).

Usage: python mcp_client_test.py LAM STORE PART_TOKENS

Talks to `LAM mcp --store STORE` over stdio, then over streamable HTTP:
lists the tools, walks every session's catalog to every id, checks each
recall (whole and every part) byte for byte against `LAM recall`, checks
recall_meta, checks that errors (unknown id, bad part, bad page, unknown
session) come back as tool errors on a session that stays usable, and times
200 recalls (p50/p99).
"""

import asyncio
import base64
import json
import re
import statistics
import subprocess
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
try:
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # mcp < 1.25
    from mcp.client.streamable_http import streamablehttp_client as http_client

LAM, STORE, PART_TOKENS = sys.argv[1], sys.argv[2], int(sys.argv[3])
checked = {"recalls": 0, "parts": 0, "errors": 0, "blobs": 0}


def fail(msg):
    raise SystemExit(f"test-mcp: FAIL: {msg}")


def lam_recall(session, shown, part=None):
    cmd = [LAM, "recall", "--store", STORE, "--session", session, "--part-tokens", str(PART_TOKENS), shown]
    if part:
        cmd.append(part)
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def result_bytes(r, what):
    """The exact bytes of a recall result: the text, or the blob when not UTF-8."""
    if r.isError:
        fail(f"{what}: tool error {[c.text for c in r.content if c.type == 'text']}")
    if len(r.content) == 1 and r.content[0].type == "text":
        return r.content[0].text.encode("utf-8")
    kinds = [c.type for c in r.content]
    if kinds != ["text", "text", "resource"] or "not valid UTF-8" not in r.content[1].text:
        fail(f"{what}: unexpected content {kinds}")
    checked["blobs"] += 1
    return base64.b64decode(r.content[2].resource.blob)


def text_of(r, what, error=False):
    if bool(r.isError) != error:
        fail(f"{what}: isError={r.isError}, expected {error}: {[getattr(c, 'text', c) for c in r.content]}")
    return "\n".join(c.text for c in r.content if c.type == "text")


async def catalog_ids(s, session):
    ids, page, pages = [], 1, 1
    while page <= pages:
        text = text_of(await s.call_tool("catalog", {"session": session, "page": page}), f"catalog {session} {page}")
        m = re.match(r"\[catalog page (\d+)/(\d+): (\d+) of (\d+) archived observations", text)
        if not m or int(m.group(1)) != page:
            fail(f"catalog {session} page {page}: bad header {text[:120]!r}")
        pages = int(m.group(2))
        lines = text.splitlines()[1:]
        if len(lines) != int(m.group(3)):
            fail(f"catalog {session} page {page}: header says {m.group(3)} lines, page has {len(lines)}")
        ids += [l.split()[0] for l in lines]
        page += 1
    if len(ids) != int(m.group(4)) or len(set(ids)) != len(ids):
        fail(f"catalog {session}: {len(ids)} ids over {pages} pages, header says {m.group(4)}")
    return ids


async def check_session(s, session, full):
    ids = await catalog_ids(s, session)
    if not ids or not all(re.fullmatch(r"§[0-9a-f]{4,40}", i) for i in ids):
        fail(f"catalog {session}: bad ids {ids[:5]}")
    for shown in ids if full else ids[:3]:
        meta = json.loads(text_of(await s.call_tool("recall_meta", {"id": shown, "session": session}), f"recall_meta {shown}"))
        want = lam_recall(session, shown)
        got = result_bytes(await s.call_tool("recall", {"id": shown, "session": session}), f"recall {shown}")
        if got != want:
            fail(f"recall {shown} ({session}): {len(got)} bytes differ from lam recall's {len(want)}")
        if meta["bytes"] != len(want) or meta["id"] != shown or session not in meta["sessions"]:
            fail(f"recall_meta {shown}: {meta}")
        checked["recalls"] += 1
        parts = meta["parts"]
        joined = b""
        for k in range(1, parts + 1):
            sel = f"{k}/{parts}" if k % 2 else k
            got = result_bytes(await s.call_tool("recall", {"id": shown, "session": session, "part": sel}), f"recall {shown} {sel}")
            if full and got != lam_recall(session, shown, f"{k}/{parts}"):
                fail(f"recall {shown} part {k}/{parts} differs from lam recall's")
            joined += got
            checked["parts"] += 1
        if joined != want:
            fail(f"recall {shown}: its {parts} parts do not join to the observation")
    return ids


async def check_errors(s, session, shown):
    cases = [
        ("recall", {"id": "§0000ffff"}, "no §0000ffff in the archive"),
        ("recall", {"id": shown, "session": session, "part": "0"}, "does not exist"),
        ("recall", {"id": shown, "session": session, "part": "1/999"}, "not 999"),
        ("recall", {"id": shown, "session": session, "part": "x"}, "expected K or K/N"),
        ("recall", {"id": "??"}, "expected §hex"),
        ("recall_meta", {"id": "§0000ffff"}, "no §0000ffff"),
        ("catalog", {"session": session, "page": 100000}, "does not exist"),
        ("catalog", {"session": "no-such-session"}, "holds no observations"),
    ]
    for tool, args, says in cases:
        msg = text_of(await s.call_tool(tool, args), f"{tool} {args}", error=True)
        if says not in msg:
            fail(f"{tool} {args}: error {msg!r} does not say {says!r}")
        checked["errors"] += 1
    # The session is still usable after every error.
    if result_bytes(await s.call_tool("recall", {"id": shown, "session": session}), "recall after errors") != lam_recall(session, shown):
        fail("recall after errors differs")


async def timed(s, ids, n=200):
    times = []
    for i in range(n):
        session, shown = ids[i % len(ids)]
        t = time.perf_counter()
        r = await s.call_tool("recall", {"id": shown, "session": session})
        times.append(time.perf_counter() - t)
        if r.isError:
            fail(f"timed recall {shown}: error")
    times.sort()
    return statistics.median(times) * 1e3, times[int(0.99 * (len(times) - 1))] * 1e3


async def exercise(s, transport, full):
    await s.initialize()
    names = sorted(t.name for t in (await s.list_tools()).tools)
    if names != ["catalog", "recall", "recall_meta"]:
        fail(f"{transport}: tools {names}")
    listing = text_of(await s.call_tool("catalog", {}), "catalog without a session")
    sessions = [re.sub(r" \(\d+ observations?\)$", "", l) for l in listing.splitlines()[1:]]
    if len(sessions) < 3:
        fail(f"{transport}: expected 3 sessions, got {listing!r}")
    all_ids = []
    for session in sessions:
        all_ids += [(session, i) for i in await check_session(s, session, full)]
    await check_errors(s, sessions[0], all_ids[0][1])
    p50, p99 = await timed(s, all_ids)
    print(f"test-mcp: {transport}: {len(sessions)} sessions, {len(all_ids)} ids; recall latency over 200 calls: p50 {p50:.2f} ms, p99 {p99:.2f} ms")


async def over_stdio():
    params = StdioServerParameters(command=LAM, args=["mcp", "--store", STORE, "--part-tokens", str(PART_TOKENS)])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await exercise(s, "stdio", full=True)


async def over_http():
    proc = subprocess.Popen([LAM, "mcp", "--store", STORE, "--part-tokens", str(PART_TOKENS), "--http", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"at (http://127\.0\.0\.1:\d+/mcp)", line)
        if not m:
            fail(f"--http: no address in {line!r}")
        async with http_client(m.group(1)) as (read, write, _):
            async with ClientSession(read, write) as s:
                await exercise(s, "http", full=False)
    finally:
        proc.terminate()
        if proc.wait(timeout=10) != 0 and proc.returncode != -15:
            fail(f"--http server exited with {proc.returncode}")


asyncio.run(over_stdio())
asyncio.run(over_http())
if checked["blobs"] == 0:
    fail("no non-UTF-8 observation or part came back as a blob")
print(f"test-mcp: ok ({checked['recalls']} recalls byte-exact vs lam recall, {checked['parts']} parts, {checked['blobs']} of them non-UTF-8 as base64 blobs, {checked['errors']} tool errors)")
