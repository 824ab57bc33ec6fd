#!/usr/bin/env bash
# `lam serve` with the official openai and anthropic Python SDKs against a
# loopback upstream stub: real trajectories replayed through every API
# (streaming and not), prefix stability on the wire, exact recall, SIGTERM,
# 64 concurrent sessions (lam-serve/tests/sdk/sdk_test.py). Idempotent:
# the venv (target/serve-venv) is made once; target/debug/lam is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/serve-venv.sh
venv=target/serve-venv
bash scripts/build-lam.sh
encoder=$(bash scripts/default-encoder.sh)
corpus="${LAM_CORPUS:-../shared/corpus}"
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-serve-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" lam-serve/tests/sdk/sdk_test.py target/debug/lam "$corpus" "$work" --encoder "$encoder"
