"""compact_messages / Compactor over OpenAI chat messages."""

import copy
import hashlib
import json

import pytest

import lam
from conftest import EXAMPLES


def messages():
    return json.loads((EXAMPLES / "edit-session.openai.json").read_text())


def test_tool_results_become_the_sessions_residuals():
    msgs = messages()
    before = copy.deepcopy(msgs)
    out = lam.compact_messages(msgs, 0.95, encoder="hashing", cache=False)
    assert msgs == before  # the input is not modified
    assert len(out) == len(msgs)
    # The same residuals as a Session over the reader's records (same actions, same ids).
    s = lam.Session(encoder="hashing", cache=False)
    residuals = [s.admit(r.action, r.observation).residual for r in lam.read_trajectory(EXAMPLES / "edit-session.openai.json")]
    tool_out = [m["content"] for m in out if m["role"] == "tool"]
    assert tool_out == residuals
    for m, o in zip(msgs, out):
        if m["role"] != "tool":
            assert m == o
        else:
            assert {k: v for k, v in m.items() if k != "content"} == {k: v for k, v in o.items() if k != "content"}
    shrunk = sum(lam.count_tokens(o["content"]) for o in out if o["role"] == "tool")
    full = sum(lam.count_tokens(m["content"]) for m in msgs if m["role"] == "tool")
    assert shrunk < full


def test_prefix_is_stable_and_earlier_messages_are_never_edited():
    msgs = messages()
    full = lam.compact_messages(msgs, encoder="hashing", cache=False)
    for cut in (4, 20, 41):
        assert lam.compact_messages(msgs[:cut], encoder="hashing", cache=False) == full[:cut]
    c = lam.Compactor(encoder="hashing", cache=False)
    seen = []
    for cut in (3, 10, 10, 30, len(msgs)):
        out = c.compact(msgs[:cut])
        assert out[: len(seen)] == seen  # what was sent before is sent again unchanged
        seen = out
    assert seen == full
    edited = copy.deepcopy(msgs)
    edited[3]["content"] = "changed"
    with pytest.raises(ValueError, match=r"messages\[3\]"):
        c.compact(edited)
    with pytest.raises(ValueError, match="messages"):
        c.compact(msgs[:5])


def test_user_observations_after_the_task():
    block = "".join(f"src/{hashlib.sha256(bytes([i])).hexdigest()[:12]}.py: {hashlib.sha1(bytes([i])).hexdigest()}\n" for i in range(40))
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Task: " + block},
        {"role": "assistant", "content": "look\n```bash\ncat all.txt\n```"},
        {"role": "user", "content": block},
        {"role": "assistant", "content": "again\n```bash\ncat all.txt\n```"},
        {"role": "user", "content": [{"type": "text", "text": block}]},
    ]
    tool_only = lam.compact_messages(msgs, encoder="hashing", cache=False)
    assert tool_only == msgs  # no tool messages: nothing changes
    out = lam.compact_messages(msgs, encoder="hashing", cache=False, observation_role="user")
    assert out[:4] == msgs[:4]  # the task and the first read stay
    assert out[5]["content"][0]["text"].startswith("[lam: ") and len(out[5]["content"][0]["text"]) < len(block) / 4
    with pytest.raises(ValueError, match="observation_role"):
        lam.compact_messages(msgs, observation_role="assistant", encoder="hashing", cache=False)
    with pytest.raises(TypeError, match=r"messages\[1\]"):
        lam.compact_messages([{"role": "system", "content": "s"}, "not a dict"], encoder="hashing", cache=False)


def test_store_recalls_every_stub(tmp_path):
    msgs = messages()
    out = lam.compact_messages(msgs, encoder="hashing", cache=False, store=str(tmp_path / "arc"), session="chat")
    store = lam.Store(str(tmp_path / "arc"))
    recs = lam.read_trajectory(EXAMPLES / "edit-session.openai.json")
    by_id = {}
    for o, r in zip([o for o in out if o["role"] == "tool"], recs):
        for line in o["content"].splitlines():
            if line.startswith("[lam: ") and "; _recall " in line:  # once per observation
                by_id[line.rsplit("_recall ", 1)[1].rstrip("]")] = r.observation
    assert by_id
    for id, original in by_id.items():
        assert store.recall(id) == original


def test_kept_tools_are_returned_whole_but_archived(tmp_path):
    msgs = messages()
    names = {c["function"]["name"] for m in msgs for c in m.get("tool_calls") or []}
    kept = sorted(names)[0]
    store = str(tmp_path / "store")
    out = lam.compact_messages(msgs, encoder="hashing", cache=False, keep_tools=[kept], store=store, session="s")
    by_id = {c["id"]: c["function"]["name"] for m in msgs for c in m.get("tool_calls") or []}
    kept_results = [(m, o) for m, o in zip(msgs, out) if m["role"] == "tool" and by_id.get(m.get("tool_call_id")) == kept]
    assert kept_results, "the example calls the kept tool"
    assert all(m == o for m, o in kept_results)
    # Still archived: every distinct tool result of the history is in the store
    # (a result repeated exactly has one content id).
    ids = lam.Store(store).ids("s")
    outputs = [m["content"] for m in msgs if m["role"] == "tool"]
    assert len(set(outputs)) <= len(ids) <= len(outputs)
