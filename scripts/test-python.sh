#!/usr/bin/env bash
# The Python package `lam` (lam-py/): builds it with maturin through pip into
# a venv (target/py-venv), installs pytest and mini-swe-agent (pinned), and
# runs lam-py/tests (parity with `lam compact`, the mini-swe-agent loop,
# threads, errors). Idempotent. Reuses what `cargo test --workspace` built:
# the wheel is built with the dev profile into target/, so only pyo3's build
# script and lam-py itself recompile; target/debug/lam is built only if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=target/py-venv
bash scripts/build-lam.sh
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "pytest==9.2.0" "mini-swe-agent==2.4.6"
t0=$(date +%s)
CARGO_TARGET_DIR="$root/target" MATURIN_PEP517_ARGS="--profile dev" \
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps ./lam-py
echo "lam-py: wheel built and installed in $(( $(date +%s) - t0 )) s (dev profile)"
cd "$root/lam-py/tests"  # import the installed package, not the source tree
LAM_BIN="$root/target/debug/lam" "$root/$venv/bin/python" -m pytest -q -p no:cacheprovider .
