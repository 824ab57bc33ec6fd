"""lam in mini-swe-agent 2.x (tested against mini-swe-agent 2.4.6 from PyPI).

Three lines in a run script::

    from lam.integrations.minisweagent import attach
    agent = DefaultAgent(model, env, **config)          # as before
    hook = attach(agent, mode="lam", store="lam-archive")
    agent.run(task)                                      # as before
    hook.close()

``attach`` wraps the agent's environment (and, in ``mode="arc"``, its model)
in place; it works for any agent class that calls ``self.env.execute`` and
``self.model.query`` (``DefaultAgent``, ``InteractiveAgent``).

- ``mode="lam"``: every command's output is archived verbatim, then admitted
  by a LAM session before it enters the history: repeated lines and
  near-duplicate windows (re-reads, re-runs) become one-line stubs citing
  ``§id``. Messages already sent are never edited, so provider prompt caches
  keep hitting.
- ``mode="arc"``: the same admission, and the model is sent ARC's bounded
  view instead of the whole history: the system message, then one user
  message with the task, a summary in which older observations became
  citations, the recent turns (as LAM residuals) verbatim, a catalog page and
  recalled bodies; system message and view together never exceed ``budget``
  cl100k tokens (``completion`` of them kept for the answer). The view holds
  the agent's turns (thought, command, output); other messages the agent adds
  to its history (format-error notices) are not shown to the model.

In both modes an action ``_recall §id [k/m]`` is answered from the archive
and never reaches the shell: in ``"lam"`` the observation is the exact
archived output (or its part ``k`` of ``m``, at most ``part_tokens`` tokens
each); in ``"arc"`` the exact part is placed in the view's recall section.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from lam._lam import Admission, ArcView, Session, count_tokens, parse_commands

_MODES = ("lam", "arc")


class LamHook:
    """The lam state of one agent run; made by :func:`attach`."""

    def __init__(
        self,
        mode: str = "lam",
        *,
        store: Optional[str] = None,
        session: Optional[str] = None,
        threshold: float = 0.95,
        encoder: str = "bert",
        model: Optional[str] = None,
        cache: Any = None,
        budget: Optional[int] = None,
        completion: int = 0,
        part_tokens: int = 2048,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode: expected 'lam' or 'arc', got {mode!r}")
        if mode == "arc" and (not isinstance(budget, int) or budget <= 0):
            raise ValueError(f"budget: mode='arc' needs a positive token budget, got {budget!r}")
        if part_tokens < 1:
            raise ValueError(f"part_tokens: must be at least 1, got {part_tokens!r}")
        self.mode = mode
        self.budget = budget
        self.completion = completion
        self.part_tokens = part_tokens
        self.admissions: List[Admission] = []
        self.thought = ""
        self._lam = dict(threshold=threshold, encoder=encoder, model=model, cache=cache)
        self._store = store
        self._name = session or "mini-swe-agent"
        self.session: Optional[Session] = None
        self.view: Optional[ArcView] = None
        if mode == "lam":
            self.session = Session(threshold, encoder, model, store or "mem:", self._name, cache=cache)

    # -- the view (mode "arc") -------------------------------------------------

    def _view_for(self, messages: List[dict]) -> ArcView:
        if self.view is None:
            system = messages[0].get("content", "") if messages else ""
            task = messages[1].get("content", "") if len(messages) > 1 else ""
            room = self.budget - count_tokens(system)
            self.view = ArcView(
                room,
                self.completion,
                self._store,
                "lam",
                task=task,
                session=self._name,
                **self._lam,
            )
        return self.view

    def prompt(self, messages: List[dict]) -> List[dict]:
        """What the model is sent in ``mode="arc"``: the system message and the view."""
        view = self._view_for(messages)
        text = view.render()["text"]
        return [messages[0], {"role": "user", "content": text}]

    # -- actions and observations ------------------------------------------------

    def answer(self, command: str, cmds: List[dict]) -> Dict[str, Any]:
        """The observation of an ARC command, answered from the archive."""
        if self.mode == "arc":
            assert self.view is not None, "the view exists once the model was asked"
            return {"output": self.view.act(command, self.thought) or "", "returncode": 0, "exception_info": ""}
        out: List[str] = []
        rc = 0
        for c in cmds:
            try:
                if c["command"] == "recall":
                    out.append(self.session.recall(c["id"], c["part_spec"], part_tokens=self.part_tokens).decode("utf-8", "replace"))
                elif c["command"] == "recall_meta":
                    out.append(repr(self.meta(c["id"])) + "\n")
                else:
                    out.append("[the catalog is shown in mode='arc' only]\n")
                    rc = 1
            except (KeyError, ValueError) as e:
                out.append(f"[{e.args[0] if e.args else e}]\n")
                rc = 1
        return {"output": "".join(out), "returncode": rc, "exception_info": ""}

    def meta(self, id: str) -> dict:
        """``_recall_meta §id`` in ``mode="lam"``: the archived record's metadata."""
        import lam

        assert self.session is not None
        self.session.flush()
        if self._store is None:
            return {"id": id, "note": "in-memory archive (pass store=DIR for metadata)"}
        return lam.Store(self._store, self._name).recall_meta(id)

    def observe(self, command: str, output: Dict[str, Any]) -> Dict[str, Any]:
        """Archive and admit one command's output; the output the model sees becomes its residual."""
        raw = output.get("output", "")
        rc = output.get("returncode")
        rc = rc if isinstance(rc, int) else None
        if self.mode == "arc":
            assert self.view is not None, "the view exists once the model was asked"
            turn = self.view.push_turn(command, raw, self.thought, rc)
            a = turn["admission"]
        else:
            a = self.session.admit(command, raw, rc)
        self.admissions.append(a)
        extra = dict(output.get("extra") or {})
        extra["lam"] = {"id": a.id, "tokens_in": a.tokens_in, "tokens_out": a.tokens_out, "stubs": len(a.stubs)}
        return {**output, "output": a.residual, "extra": extra}

    @property
    def digest(self) -> Optional[str]:
        """Digest of the run's LAM deletion set."""
        return self.view.digest if self.mode == "arc" and self.view is not None else (self.session.digest if self.session else None)

    def recall(self, id: str, part: Any = None) -> bytes:
        """Exact archived bytes of ``id`` (either mode)."""
        if self.mode == "arc":
            assert self.view is not None
            return self.view.recall(id)
        return self.session.recall(id, part, part_tokens=self.part_tokens)

    def close(self) -> None:
        """Make the archive durable and save the embedding cache."""
        if self.session is not None:
            self.session.close()
        if self.view is not None:
            self.view.flush()


class LamEnvironment:
    """An environment that answers ARC commands from the archive and admits
    every other command's output through LAM (everything else delegated)."""

    def __init__(self, env: Any, hook: LamHook) -> None:
        self._env = env
        self.lam = hook

    def execute(self, action: dict, cwd: str = "", **kwargs: Any) -> Dict[str, Any]:
        command = action.get("command", "")
        cmds = parse_commands(command) if isinstance(command, str) else None
        if cmds is not None:
            return self.lam.answer(command, cmds)
        out = self._env.execute(action, cwd, **kwargs)
        return self.lam.observe(command, out)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


class LamModel:
    """A model that is sent ARC's bounded view instead of the whole history
    (``mode="arc"``), and tells the hook each response's thought."""

    def __init__(self, model: Any, hook: LamHook) -> None:
        self._model = model
        self.lam = hook

    def query(self, messages: List[dict], **kwargs: Any) -> dict:
        sent = self.lam.prompt(messages) if self.lam.mode == "arc" else messages
        out = self._model.query(sent, **kwargs)
        content = out.get("content") if isinstance(out, dict) else None
        self.lam.thought = content if isinstance(content, str) else ""
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def attach(agent: Any, mode: str = "lam", **settings: Any) -> LamHook:
    """Wire lam into ``agent`` (a mini-swe-agent agent) in place and return
    the hook. ``settings``: ``store`` (archive directory; default in memory),
    ``session`` (its name), ``threshold``, ``encoder`` (``"bert"`` or
    ``"hashing"``), ``model``, ``cache``, ``budget`` and ``completion``
    (``mode="arc"``), ``part_tokens``."""
    if isinstance(agent.env, LamEnvironment):
        raise ValueError("agent: lam is already attached")
    hook = LamHook(mode, **settings)
    agent.env = LamEnvironment(agent.env, hook)
    agent.model = LamModel(agent.model, hook)
    return hook
