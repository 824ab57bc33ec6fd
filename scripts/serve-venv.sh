#!/usr/bin/env bash
# The venv the proxy's client-side tests use (target/serve-venv): the
# official openai, anthropic and mcp SDKs from PyPI. Made once; idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/serve-venv
if ! "$venv/bin/python" -c 'import openai, anthropic, httpx, mcp.client.stdio' 2>/dev/null; then
  echo "creating $venv (openai, anthropic, mcp from PyPI)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "openai>=1.66,<3" "anthropic>=0.49,<1" "mcp>=1.9,<2"
fi
