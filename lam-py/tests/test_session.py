"""Session, Admission, Store, Record, read_trajectory: behaviour and errors."""

import gzip
import hashlib

import pytest

import lam
from conftest import EXAMPLES

LOG = "".join(f"tests/test_{i}.py::test_case PASSED\n" for i in range(30))


def test_rerun_becomes_one_line_naming_the_first_run():
    s = lam.Session(encoder="hashing", cache=False)
    first = s.admit("pytest", LOG)
    assert first.residual == LOG and first.stubs == [] and first.id.startswith("§")
    again = s.admit("pytest -x", LOG)
    (stub,) = again.stubs
    assert stub["kind"] == "repeat" and stub["id"] == again.id and stub["representative"] == "pytest"
    assert stub["text"] == f"[lam: same output as `pytest` above; _recall {again.id}]"
    assert stub["distance"] == 0.0 and stub["text"] + "\n" == again.residual
    assert again.tokens_out < again.tokens_in == first.tokens_in
    assert s.records == 2 and s.ids == [first.id, again.id]
    assert 0.0 <= s.delta_hat <= s.delta
    st = s.stats()
    assert st["records"] == 2 and st["chunks_dropped"] >= 1 and st["digest"] == s.digest


@pytest.mark.parametrize("recall,tail", [("none", "last time]"), ("recall", "last time; recall §"), ("mcp__lam__recall", "last time; mcp__lam__recall §")])
def test_the_recall_handle_is_the_surfaces(recall, tail):
    s = lam.Session(encoder="hashing", cache=False, recall=recall)
    s.admit("pytest", LOG)
    (stub,) = s.admit("pytest", LOG).stubs
    assert stub["text"].startswith("[lam: same output as last time") and tail in stub["text"]
    assert stub["representative"] == "pytest"


def test_a_bad_recall_handle_is_a_value_error():
    with pytest.raises(ValueError, match="recall"):
        lam.Session(encoder="hashing", cache=False, recall="semi;colon")


def test_repeated_lines_stub():
    s = lam.Session(encoder="hashing", cache=False)
    block = "".join(f"line {i} of a long and distinctive listing\n" for i in range(40))
    s.admit("cat a", "header A\n" + block)
    a = s.admit("cat b", "completely different preface text here\n" + block + "tail")
    kinds = {st["kind"] for st in a.stubs}
    assert kinds, a.residual
    for st in a.stubs:
        # Named as the model saw it: the earlier call and its lines.
        assert st["id"] == a.id and st["representative"].endswith(" of `cat a`"), st
        assert "§" not in st["text"].split(";")[0], st["text"]
        if st["kind"] == "lines":
            assert st["distance"] is None and st["lines"] >= 1


def test_bytes_survive_exactly(tmp_path):
    obs = b"".join(b"\xff\xfe %s \x80\n" % hashlib.sha256(b"%d" % i).hexdigest().encode() for i in range(50))
    s = lam.Session(encoder="hashing", cache=False, store=str(tmp_path / "arc"), session="bytes")
    a = s.admit(b"cat blob", obs)
    assert a.residual_bytes == obs and "\ufffd" in a.residual
    b = s.admit("cat blob again", obs)
    assert b.stubs
    assert s.recall(b.id) == obs and s.recall(a.id.lstrip("§")) == obs
    s.flush()
    store = lam.Store(str(tmp_path / "arc"))
    assert store.recall(b.id) == obs
    parts = [store.recall(b.id, k, part_tokens=16) for k in range(1, 200) if _has_part(store, b.id, k)]
    assert b"".join(parts) == obs and len(parts) > 1
    meta = store.recall_meta(b.id)
    assert meta["bytes"] == len(obs) and meta["session"] == "bytes" and meta["action"] == "cat blob again"
    assert store.sessions() == ["bytes"] and store.ids("bytes") == [a.id, b.id]
    s.close()


def _has_part(store, id, k):
    try:
        store.recall(id, k, part_tokens=16)
        return True
    except ValueError:
        return False


def test_store_sees_a_writers_later_appends(tmp_path):
    s = lam.Session(encoder="hashing", cache=False, store=str(tmp_path / "arc"), session="w")
    s.admit("echo 1", "one\n")
    s.flush()
    reader = lam.Store(str(tmp_path / "arc"))
    a = s.admit("echo 2", "two\n")
    s.flush()
    assert reader.recall(a.id) == b"two\n"  # reopened on a miss
    with pytest.raises(KeyError, match="nearest"):
        reader.recall("§00000000")
    s.close()


def test_parts_are_checked(tmp_path):
    s = lam.Session(encoder="hashing", cache=False, store="mem:")
    a = s.admit("cat", LOG)
    assert s.recall(a.id, "1/1") == LOG.encode()
    for bad in [0, 2, "1/2", "x", "2/1"]:
        with pytest.raises(ValueError, match="part"):
            s.recall(a.id, bad)
    with pytest.raises(TypeError, match="part"):
        s.recall(a.id, 1.5)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(threshold=1.5), ValueError, "threshold"),
        (dict(threshold=-1.0), ValueError, "threshold"),
        (dict(encoder="word2vec"), ValueError, "encoder"),
        (dict(order="l2-l0"), ValueError, "order"),
        (dict(index="lsh"), ValueError, "index"),
        (dict(store="redis://h/0"), ValueError, "store"),
        (dict(session=""), ValueError, "session"),
        (dict(cache=3), TypeError, "cache"),
        (dict(cache="redis://h/0"), ValueError, "cache: redis://h/0: a `redis://` URL is not a file"),
        (dict(batch=0), ValueError, "batch"),
        (dict(model="/nonexistent/model", encoder="bert"), OSError, "model"),
    ],
)
def test_bad_arguments_raise_naming_them(kwargs, exc, name):
    kwargs.setdefault("encoder", "hashing")
    kwargs.setdefault("cache", False)
    with pytest.raises(exc, match=name):
        lam.Session(**kwargs)


def test_bad_admit_arguments():
    s = lam.Session(encoder="hashing", cache=False)
    with pytest.raises(TypeError, match="action"):
        s.admit(None, "x")
    with pytest.raises(TypeError, match="observation"):
        s.admit("ls", 42)
    with pytest.raises(ValueError, match="action"):
        s.admit(b"\xff", "x")
    with pytest.raises(ValueError, match="store"):
        s.recall("§00000000")
    # The session is untouched by refused arguments.
    assert s.records == 0
    s.admit("ls", "ok\n")
    assert s.records == 1


def test_store_open_errors(tmp_path):
    with pytest.raises(OSError):
        lam.Store(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="path"):
        lam.Store("")


def test_read_trajectory(tmp_path):
    recs = lam.read_trajectory(EXAMPLES / "edit-session.jsonl")
    assert recs[0].index == 0 and recs[0].action == "ls" and isinstance(recs[0].observation, bytes)
    assert recs[0].observation_text == recs[0].observation.decode()
    (t,) = lam.read_trajectories(EXAMPLES / "edit-session.openai.json")
    assert t.format == "openai-chat" and len(t.records) == len(recs) and t.task
    with pytest.raises(FileNotFoundError):
        lam.read_trajectory(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.traj.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.traj.json"):
        lam.read_trajectory(bad)
    two = tmp_path / "two.jsonl.gz"
    two.write_bytes(gzip.compress(b'{"session":"a","index":0,"observation":"x"}\n{"session":"b","index":0,"observation":"y"}\n'))
    with pytest.raises(ValueError, match="2 sessions"):
        lam.read_trajectory(two)
    assert [t.session for t in lam.read_trajectories(two)] == ["a", "b"]


def test_record_and_helpers():
    r = lam.Record("cat x", b"\x00\xff", index=3, returncode=1)
    assert r.observation == b"\x00\xff" and r.index == 3 and r.returncode == 1
    with pytest.raises(TypeError, match="observation"):
        lam.Record("a", None)
    assert lam.count_tokens("hello world") == 2 and lam.count_tokens(b"") == 0
    assert lam.parse_commands("ls -la") is None
    assert lam.parse_commands("echo _recall §a1b2c3d4") is None
    (c,) = lam.parse_commands("_recall §A1B2C3D4 2/5")
    assert c == {"command": "recall", "id": "§a1b2c3d4", "part": 2, "part_spec": "2/5"}


def test_context_manager_flushes(tmp_path):
    with lam.Session(encoder="hashing", cache=False, store=str(tmp_path / "arc"), session="cm") as s:
        a = s.admit("ls", "x\n")
    assert lam.Store(str(tmp_path / "arc")).recall(a.id) == b"x\n"
    # Closed: the writer lock is released, so a new writer can open the store.
    lam.Session(encoder="hashing", cache=False, store=str(tmp_path / "arc"), session="cm2").close()


def test_an_encoder_this_build_lacks_says_which_feature_to_enable():
    # The wheel the tests build has the CPU encoders only.
    with pytest.raises(ValueError, match="`cuda` feature"):
        lam.Session(encoder="cuda-bf16", cache=False)
    with pytest.raises(ValueError, match="expected one of"):
        lam.Session(encoder="gpu", cache=False)
