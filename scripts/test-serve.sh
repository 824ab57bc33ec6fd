#!/usr/bin/env bash
# `lam serve` with the official openai and anthropic Python SDKs against a
# loopback upstream stub: real trajectories replayed through every API
# (streaming and not), prefix stability on the wire, exact recall, SIGTERM,
# 64 concurrent sessions (lam-serve/tests/sdk/sdk_test.py). Idempotent:
# the venv (target/serve-venv) is made once; target/debug/lam is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/serve-venv
if ! "$venv/bin/python" -c 'import openai, anthropic, httpx, mcp.client.stdio' 2>/dev/null; then
  echo "creating $venv (openai, anthropic, mcp from PyPI)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "openai>=1.66,<3" "anthropic>=0.49,<1" "mcp>=1.9,<2"
fi
cargo build -q -p lam
LAM_HOME="${LAM_HOME:-$HOME/.cache/lam}"
encoder=hashing
[ -f "$LAM_HOME/models/all-MiniLM-L6-v2/model.safetensors" ] && encoder=bert
corpus="${LAM_CORPUS:-../shared/corpus}"
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-serve-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" lam-serve/tests/sdk/sdk_test.py target/debug/lam "$corpus" "$work" --encoder "$encoder"
