"""ArcView: the prompt never exceeds its limit, and _recall gives exact bytes."""

import pytest

import lam
from conftest import EXAMPLES


@pytest.mark.parametrize("policy", ["arc", "lam"])
def test_bounded_view_and_exact_recall(policy, tmp_path):
    (t,) = lam.read_trajectories(EXAMPLES / "edit-session.jsonl")
    v = lam.ArcView(3000, 500, str(tmp_path / "arc"), policy, task=t.task or "Fix the tests.", encoder="hashing", cache=False)
    assert v.policy == policy and v.budgets()["limit"] == 2500
    ids = []
    for r in t.records:
        turn = v.push_turn(r.action, r.observation, "thinking", r.returncode)
        ids.append(turn["id"])
        assert (turn["admission"] is not None) == (policy == "lam")
        view = v.render()
        assert view["tokens"] <= view["limit"] == 2500
        assert lam.count_tokens(view["text"]) <= 2500
    view = v.render()
    assert view["citations"], "older observations became citations"
    cited = view["citations"][0]
    original = t.records[ids.index(cited)].observation
    assert v.recall(cited) == original
    answer = v.act(f"_recall {cited}")
    assert "recall section" in answer
    view = v.render()
    assert original.decode() in view["text"] or "part 1/" in view["text"]
    assert view["tokens"] <= 2500 and view["recalled"]
    assert v.act("ls -la") is None
    assert (v.digest is not None) == (policy == "lam")
    v.flush()
    assert lam.Store(str(tmp_path / "arc")).recall(cited) == original


def test_view_arguments():
    with pytest.raises(ValueError, match="budget"):
        lam.ArcView(100, 0, None, "arc", task="x" * 2000)
    with pytest.raises(ValueError, match="policy"):
        lam.ArcView(4000, 0, None, "window")
    with pytest.raises(ValueError, match="budget"):
        lam.ArcView(1000, 2000)
