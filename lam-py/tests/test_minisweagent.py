"""lam in mini-swe-agent's real agent loop: its DefaultAgent and
LocalEnvironment run real shell commands in a throwaway git repository,
driven by a scripted model built on mini-swe-agent's DeterministicModel."""

import copy
import os
import re
import subprocess
import tempfile

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-"))

import minisweagent  # noqa: E402  (scripts/test-python.sh installs the pinned release)
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models.test_models import DeterministicModel, make_output  # noqa: E402

import lam  # noqa: E402

PINNED = "2.4.6"

CALC = "".join(
    f"def op_{i}(a, b):\n    \"\"\"Operation {i}: combine a and b with weight {i * 7 % 13}.\"\"\"\n    return a * {i} + b - {i % 5}\n\n" for i in range(25)
) + "def sub(a, b):\n    return a - b + 1\n"

TESTS = '''import calc

def check(name, got, want):
    print(f"{name:<24} {'ok' if got == want else 'FAIL'}  got={got!r} want={want!r}")
    return got == want

results = [check(f"test_op_{i}", getattr(calc, f"op_{i}")(2, 3), 2 * i + 3 - i % 5) for i in range(25)]
results.append(check("test_sub", calc.sub(5, 3), 2))
print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
'''

COMMANDS = [
    "ls",
    "cat calc.py",
    "python3 test_calc.py",
    "cat calc.py",  # re-read
    "sed -i 's/return a - b + 1/return a - b/' calc.py",
    "python3 test_calc.py",  # re-run
    "cat calc.py",  # re-read after the edit
]
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"


def repo(tmp_path):
    d = tmp_path / "repo"
    d.mkdir(parents=True)
    (d / "calc.py").write_text(CALC)
    (d / "test_calc.py").write_text(TESTS)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=d, check=True, env=env)
    return d


class ScriptedModel(DeterministicModel):
    """mini-swe-agent's deterministic test model, replaying `commands`; when
    they run out, `tail(prompts)` gives more (decided from what it was sent)."""

    def __init__(self, commands, tail=None):
        super().__init__(outputs=[])
        self.commands = list(commands)
        self.tail = tail
        self.prompts = []

    def query(self, messages, **kwargs):
        self.prompts.append(copy.deepcopy([{k: v for k, v in m.items() if k != "extra"} for m in messages]))
        if not self.commands and self.tail is not None:
            self.commands.extend(self.tail(self.prompts))
            self.commands.append(SUBMIT)
            self.tail = None
        cmd = self.commands.pop(0) if self.commands else SUBMIT
        return make_output(f"THOUGHT: next step.\n\n```mswea_bash_command\n{cmd}\n```", [{"command": cmd}], cost=0.0)


def agent_for(model, workdir):
    return DefaultAgent(
        model,
        LocalEnvironment(cwd=str(workdir), timeout=30),
        system_template="You are a helpful assistant that can run bash commands.",
        instance_template="Fix calc.sub so that test_calc.py passes. {{task}}",
        step_limit=40,
        cost_limit=0,
    )


def observations(messages):
    return [m for m in messages if m["role"] == "user" and "raw_output" in (m.get("extra") or {})]


def normalized(messages):
    drop = {"timestamp"}
    return [{k: ({a: b for a, b in v.items() if a not in drop} if k == "extra" else v) for k, v in m.items()} for m in messages]


def tokens(prompt):
    return sum(lam.count_tokens(m["content"]) for m in prompt)


def plain_run(tmp_path):
    model = ScriptedModel(COMMANDS + [SUBMIT])
    agent = agent_for(model, repo(tmp_path))
    result = agent.run("")
    return agent, model, result


def test_pinned_version():
    assert minisweagent.__version__ == PINNED


def test_without_the_integration_the_run_is_unchanged(tmp_path):
    import lam.integrations.minisweagent  # noqa: F401  (importing must change nothing)

    a1, _, r1 = plain_run(tmp_path / "one")
    a2, _, r2 = plain_run(tmp_path / "two")
    assert r1["exit_status"] == "Submitted" and "return a - b\n" in r1["submission"]
    assert normalized(a1.messages) == normalized(a2.messages)
    assert r1 == r2


def test_lam_mode_shrinks_rereads_and_recalls_exact_outputs(tmp_path):
    from lam.integrations.minisweagent import attach

    plain_agent, plain_model, plain_result = plain_run(tmp_path / "plain")
    originals = [m["extra"]["raw_output"] for m in observations(plain_agent.messages)]

    def recall_every_stub(_prompts):
        ids = []
        for a in hook.admissions:
            for st in a.stubs:
                if st["id"] not in ids:
                    ids.append(st["id"])
        assert ids, "the re-reads produced stubs"
        return [f"_recall {i}" for i in ids]

    model = ScriptedModel(COMMANDS, tail=recall_every_stub)
    agent = agent_for(model, repo(tmp_path / "lam"))
    hook = attach(agent, mode="lam", store=str(tmp_path / "arc"), session="msa", encoder="hashing", cache=False)
    result = agent.run("")
    hook.close()

    # The same commands ran with the same effect.
    assert result == plain_result
    obs = observations(agent.messages)
    n = len(COMMANDS)
    assert [m["extra"]["lam"]["id"] for m in obs[:n]] == [a.id for a in hook.admissions]
    # Re-reads and re-runs shrink.
    plain_obs = observations(plain_agent.messages)
    for k in (3, 5):
        assert lam.count_tokens(obs[k]["content"]) < lam.count_tokens(plain_obs[k]["content"]) / 2, COMMANDS[k]
    assert obs[0]["content"] == plain_obs[0]["content"]  # nothing to remove from a first, short listing
    # Messages already sent are never edited: every prompt extends the previous one.
    for before, after in zip(model.prompts, model.prompts[1:]):
        assert after[: len(before)] == before
    assert tokens(model.prompts[n]) < tokens(plain_model.prompts[n])
    # Every stub's _recall returned the exact original output, through the loop.
    id_to_original = {a.id: originals[k] for k, a in enumerate(hook.admissions)}
    recalls = obs[n:]
    assert recalls
    sent = [re.search(r"_recall (§[0-9a-f]+)", msg["content"]).group(1) for msg in agent.messages if msg["role"] == "assistant" and "_recall" in (msg["content"] or "")]
    assert len(sent) == len(recalls)
    for rid, m in zip(sent, recalls):
        assert m["extra"]["raw_output"] == id_to_original[rid]
        assert m["extra"]["returncode"] == 0
        assert lam.Store(str(tmp_path / "arc")).recall(rid) == id_to_original[rid].encode()


def test_arc_mode_keeps_every_prompt_within_budget(tmp_path):
    from lam.integrations.minisweagent import attach

    budget = 1500
    plain_agent, plain_model, _ = plain_run(tmp_path / "plain")
    assert max(tokens(p) for p in plain_model.prompts) > budget  # the budget binds

    def recall_a_citation(prompts):
        text = prompts[-1][1]["content"]
        cited = re.findall(r"_recall (§[0-9a-f]{4,40})", text)
        assert cited, "the view cites archived observations"
        return [f"_recall {cited[0]}", "ls"]

    model = ScriptedModel(COMMANDS, tail=recall_a_citation)
    agent = agent_for(model, repo(tmp_path / "arc-run"))
    hook = attach(agent, mode="arc", budget=budget, encoder="hashing", cache=False)
    result = agent.run("")
    assert result["exit_status"] == "Submitted" and "return a - b\n" in result["submission"]
    for p in model.prompts:
        assert tokens(p) <= budget
        assert [m["role"] for m in p] == ["system", "user"]
    # The recalled part is in the next prompt, byte for byte.
    rid = re.search(r"_recall (§[0-9a-f]{4,40})", [m for m in agent.messages if m["role"] == "assistant"][len(COMMANDS)]["content"]).group(1)
    body = hook.recall(rid)
    after = model.prompts[len(COMMANDS) + 1][1]["content"]
    header = re.search(rf"\[recalled {rid} part 1/(\d+): exact bytes (\d+)-(\d+) of (\d+)", after)
    assert header, after[-800:]
    start, end, total = int(header.group(2)), int(header.group(3)), int(header.group(4))
    assert total == len(body) and body[start:end].decode() in after
    hook.close()


def test_attach_arguments(tmp_path):
    from lam.integrations.minisweagent import attach

    agent = agent_for(ScriptedModel([SUBMIT]), tmp_path)
    with pytest.raises(ValueError, match="mode"):
        attach(agent, mode="window", encoder="hashing")
    with pytest.raises(ValueError, match="budget"):
        attach(agent, mode="arc", encoder="hashing")
    attach(agent, mode="lam", encoder="hashing", cache=False)
    with pytest.raises(ValueError, match="already"):
        attach(agent, mode="lam", encoder="hashing")
