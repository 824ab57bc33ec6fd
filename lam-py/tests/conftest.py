"""Shared paths: the repository, the lam binary, the corpus beside the checkout."""

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def corpus_dir() -> pathlib.Path:
    """As lam_core::corpus_dir: $LAM_CORPUS, else ../shared/corpus beside the checkout."""
    env = os.environ.get("LAM_CORPUS")
    return pathlib.Path(env) if env else REPO.parent / "shared" / "corpus"


def lam_bin() -> pathlib.Path:
    """The `lam` program `cargo test --workspace` built ($LAM_BIN to override)."""
    env = os.environ.get("LAM_BIN")
    return pathlib.Path(env) if env else REPO / "target" / "debug" / "lam"


def bert_model() -> pathlib.Path:
    home = pathlib.Path(os.environ.get("LAM_HOME", pathlib.Path.home() / ".cache" / "lam"))
    return pathlib.Path(os.environ.get("LAM_MODEL", home / "models" / "all-MiniLM-L6-v2"))


@pytest.fixture(scope="session")
def corpus() -> pathlib.Path:
    p = corpus_dir()
    assert p.is_dir(), f"corpus not found at {p}: check out the repository beside shared/ or set LAM_CORPUS"
    return p


@pytest.fixture(scope="session")
def lam_program() -> pathlib.Path:
    p = lam_bin()
    assert p.is_file(), f"{p} missing: run `cargo build -p lam` (scripts/test-python.sh does) or set LAM_BIN"
    return p
