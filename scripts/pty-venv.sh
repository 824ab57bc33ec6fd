#!/usr/bin/env bash
# The venv the pseudo-terminal tests of the real agents use (target/pty-venv):
# pyte from PyPI, a terminal emulator that reads the screen and answers the
# agents' terminal queries. Made once; idempotent. When PyPI cannot be
# reached it prints SKIPPED and exits 0 (lam/tests/agents/pty_test.py then
# says SKIPPED too).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pty-venv
if ! "$venv/bin/python" -c 'import pyte' 2>/dev/null; then
  echo "creating $venv (pyte from PyPI)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! timeout 120 "$venv/bin/pip" install --quiet --disable-pip-version-check "pyte>=0.8,<0.9"; then
    echo "SKIPPED: pty-venv: pyte could not be installed from PyPI; the pseudo-terminal tests will be skipped" >&2
  fi
fi
