"""The README's complete mini-swe-agent example runs as printed."""

import os
import re
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-"))

import lam

README = Path(__file__).resolve().parents[1] / "README.md"


def test_minisweagent_example_runs(capsys):
    text = README.read_text()
    m = re.search(r"<!-- example: minisweagent -->\n```python\n(.*?)\n```\n", text, re.S)
    assert m, "the README keeps its example block"
    exec(compile(m.group(1), str(README), "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert out.startswith("Submitted stubs per observation: [")


def test_missing_model_error_speaks_python(tmp_path):
    with pytest.raises(OSError) as e:
        lam.Session(encoder="bert", model=str(tmp_path / "no-model"))
    msg = str(e.value)
    assert "lam.install_model()" in msg and 'encoder="hashing"' in msg and "model=" in msg
    assert "--model" not in msg and "scripts/install-model.sh" not in msg


def test_install_model_is_idempotent_where_lam_looks():
    home = lam._model.lam_home()
    if not (home / "models" / "all-MiniLM-L6-v2" / "model.safetensors").is_file():
        pytest.skip("model not installed here: install_model would download it")
    path = lam.install_model()
    assert path == home / "models" / "all-MiniLM-L6-v2"
    assert (path / "tokenizer.json").is_file()
