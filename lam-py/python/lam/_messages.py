"""LAM over OpenAI chat-completions message lists."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, List, Optional, Tuple

from lam import _lam
from lam._lam import Admission, Session

_ROLES = ("tool", "user")


def _fingerprint(m: Any) -> str:
    blob = json.dumps(m, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha1(blob.encode("utf-8", "surrogatepass")).hexdigest()


def _tool_name(messages: List[dict], i: int) -> Optional[str]:
    """The name of the tool whose result messages[i] is (by tool_call_id)."""
    call_id = messages[i].get("tool_call_id")
    for prev in reversed(messages[:i]):
        if isinstance(prev, dict) and prev.get("role") == "assistant":
            for call in prev.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id") == call_id:
                    return (call.get("function") or call).get("name")
            return None
    return None


def _action_for(messages: List[dict], i: int) -> str:
    """The action whose result messages[i] is, by lam's one rule (in Rust,
    shared with the readers and ``lam serve``): the assistant tool call that
    messages[i] answers (``tool_call_id``) as ``name(arguments)``, else the
    whole assistant message's action."""
    for prev in reversed(messages[:i]):
        if isinstance(prev, dict) and prev.get("role") == "assistant":
            call_id = messages[i].get("tool_call_id")
            return _lam._action_for(json.dumps(prev, default=str), call_id if isinstance(call_id, str) else None)
    return ""


class Compactor:
    """Compact a growing chat history, one call per model call.

    Each call admits only the messages it has not seen; messages it already
    returned are returned again unchanged (the prompt prefix a provider has
    cached never changes), and an edited earlier message is a ValueError.
    Tool results (``role: tool``) are replaced by their LAM residuals; with
    ``observation_role="user"`` so are user messages after the first one
    (the task), as in text-based agents. System and assistant messages are
    never touched. Results of the tools named in ``keep_tools`` are archived
    and admitted (later observations may cite them) but returned whole: for
    tools whose exact output the agent must act on.
    """

    def __init__(
        self,
        threshold: float = 0.95,
        *,
        observation_role: str = "tool",
        encoder: str = "bert",
        model: Optional[str] = None,
        store: Optional[str] = None,
        session: Optional[str] = None,
        cache: Any = None,
        lam_session: Optional[Session] = None,
        keep_tools: Iterable[str] = (),
        recall: str = "_recall",
    ) -> None:
        if observation_role not in _ROLES:
            raise ValueError(f"observation_role: expected 'tool' or 'user', got {observation_role!r}")
        self.observation_role = observation_role
        self.keep_tools = frozenset(keep_tools)
        self.session = lam_session or Session(threshold, encoder, model, store, session, cache=cache, recall=recall)
        self.admissions: List[Tuple[int, Admission]] = []
        self._seen: List[str] = []
        self._out: List[dict] = []
        self._task_seen = False

    def _is_observation(self, m: dict) -> bool:
        role = m.get("role")
        if role == "tool":
            return True
        if role == "user":
            if not self._task_seen:
                self._task_seen = True
                return False
            return self.observation_role == "user"
        return False

    def _admit(self, action: str, text: str, i: int) -> str:
        a = self.session.admit(action, text)
        self.admissions.append((i, a))
        return a.residual

    def _one(self, messages: List[dict], i: int) -> dict:
        m = messages[i]
        if not isinstance(m, dict):
            raise TypeError(f"messages[{i}]: expected a dict, got {type(m).__name__}")
        if not self._is_observation(m):
            return m
        content = m.get("content")
        action = _action_for(messages, i)
        keep = m.get("role") == "tool" and _tool_name(messages, i) in self.keep_tools
        out = dict(m)
        if isinstance(content, str):
            residual = self._admit(action, content, i)
            out["content"] = content if keep else residual
        elif isinstance(content, list):
            # As lam's reader: the text parts together are the observation.
            is_text = lambda p: isinstance(p, str) or (isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
            text = "".join(p if isinstance(p, str) else p["text"] for p in content if is_text(p))
            rest = [p for p in content if not is_text(p)]
            residual = self._admit(action, text, i)
            out["content"] = content if keep else [{"type": "text", "text": residual}] + rest
        return out

    def compact(self, messages: Iterable[dict]) -> List[dict]:
        """The whole history with every observation replaced by its residual."""
        messages = list(messages)
        n = len(self._seen)
        if len(messages) < n:
            raise ValueError(f"messages: {len(messages)} given, but {n} were compacted before; pass the whole history")
        for i in range(n):
            if _fingerprint(messages[i]) != self._seen[i]:
                raise ValueError(f"messages[{i}] changed since it was compacted; earlier messages are never edited")
        for i in range(n, len(messages)):
            self._out.append(self._one(messages, i))
            self._seen.append(_fingerprint(messages[i]))
        return [dict(m) for m in self._out]


def compact_messages(
    messages: Iterable[dict],
    threshold: float = 0.95,
    *,
    observation_role: str = "tool",
    encoder: str = "bert",
    model: Optional[str] = None,
    store: Optional[str] = None,
    session: Optional[str] = None,
    cache: Any = None,
    keep_tools: Iterable[str] = (),
    recall: str = "_recall",
) -> List[dict]:
    """OpenAI chat messages with tool results (and, with
    ``observation_role="user"``, user turns after the task) replaced by their
    LAM residuals, admitted in order; earlier messages are never edited, so
    compacting a longer history gives the same prefix. With ``store`` every
    original is archived first and each stub's ``_recall §id`` resolves there
    (``lam.Store(store).recall(id)``). Results of the tools in ``keep_tools``
    are archived but returned whole. ``recall`` names, in each stub, the way
    the model can get an original back: ``"_recall"`` (default; the action
    lam's views and mini-swe-agent integration understand), the name of a
    recall tool you give the model (one that calls ``lam.Store.recall``), or
    ``"none"`` (no handle)."""
    c = Compactor(
        threshold,
        observation_role=observation_role,
        encoder=encoder,
        model=model,
        store=store,
        session=session,
        cache=cache,
        keep_tools=keep_tools,
        recall=recall,
    )
    out = c.compact(messages)
    c.session.close()
    return out
