#!/usr/bin/env bash
# The proxy soak (`cargo xtask soak`; issue #57): every shared transcript
# replayed pass after pass through one `lam serve` on a throwaway
# PostgreSQL under --max-memory, PostgreSQL stopped and started part-way
# (lam-serve/tests/sdk/soak_test.py says what is checked). A few minutes;
# not part of .ci/run. Arguments go to soak_test.py (--passes, --per-session,
# --outage-s, --max-memory). Installs PostgreSQL like scripts/test-postgres.sh
# (CI=true or LAM_TEST_SYSTEM=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/serve-venv.sh
cargo build -q -p lam-ctx
corpus="${LAM_CORPUS:-../shared/corpus}"
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-soak.XXXXXX")"
trap 'rm -rf "$work"' EXIT
bash scripts/test-postgres.sh --with target/serve-venv/bin/python lam-serve/tests/sdk/soak_test.py \
  target/debug/lam "$corpus" "$work" "$@"
