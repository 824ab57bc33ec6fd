"""lam: keep the context of LLM agents small and lossless.

LAM tests every arriving tool observation before the model sees it:
near-duplicate token windows (L1) and repeated lines (L0) become one-line
stubs naming where the text is readable (an earlier call and its lines, as
the model saw them) and an exact recall handle (``§id``). ARC
archives every original verbatim and builds a bounded prompt view with
citations and exact ``_recall §id [k/m]``.

The core is Rust (``lam._lam``); the GIL is released while observations are
encoded, admitted and archived.
"""

from lam._lam import (
    Admission,
    ArcView,
    Record,
    Session,
    Store,
    Trajectory,
    __version__,
    count_tokens,
    parse_commands,
    read_trajectories,
    read_trajectory,
)
from lam._messages import Compactor, compact_messages
from lam._model import install_model

__all__ = [
    "Admission",
    "ArcView",
    "Compactor",
    "Record",
    "Session",
    "Store",
    "Trajectory",
    "__version__",
    "compact_messages",
    "count_tokens",
    "install_model",
    "parse_commands",
    "read_trajectories",
    "read_trajectory",
]
