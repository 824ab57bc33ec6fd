#!/usr/bin/env bash
# A virtual environment with PyTorch and sentence-transformers for the encoder
# benchmark's peer (`cargo xtask bench-encoder`). Not needed by the tests.
# Prints the venv's python.
set -euo pipefail
LAM_HOME="${LAM_HOME:-$HOME/.cache/lam}"
venv="$LAM_HOME/bench-venv"
if ! "$venv/bin/python" -c 'import torch, sentence_transformers' 2>/dev/null; then
  echo "creating $venv (torch, sentence-transformers; a few GB)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "torch==2.15.0" "sentence-transformers" >&2
fi
echo "$venv/bin/python"
