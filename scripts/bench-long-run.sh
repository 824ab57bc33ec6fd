#!/usr/bin/env bash
# A long budgeted run on PostgreSQL (issue 68, item 5): a fresh
# conversation's per-request time at the start of a run and after 3,000 and
# 9,000 other requests, and one lam serve on a folder store, one on
# PostgreSQL and three behind HAProxy on PostgreSQL side by side, on real
# Claude Code traffic (lam-serve/tests/sdk/bench_long_run.py). A benchmark,
# not a test (docs/deploy.md). Needs haproxy and PostgreSQL
# (scripts/test-deploy.sh installs both); the release build.
#
#   bash scripts/bench-long-run.sh [--fill N] [--probe N] [--budget B]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v haproxy >/dev/null || { echo "haproxy is not installed: LAM_TEST_SYSTEM=1 bash scripts/test-deploy.sh installs it" >&2; exit 1; }
bash scripts/serve-venv.sh
cargo build -q --release -p lam-ctx
t="${LAM_CORPUS:-../shared/corpus}/agent-transcripts"
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-bench-long-run.XXXXXX")"
trap 'rm -rf "$work"' EXIT
bash scripts/test-postgres.sh --with target/serve-venv/bin/python lam-serve/tests/sdk/bench_long_run.py target/release/lam "$work" \
  --transcripts "$t/spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl" "$t/spotter/4d5611e5-241a-462a-8d15-5122611a9569" "$t/cctrace" "$@"
