#!/usr/bin/env bash
# One `lam serve` against three behind HAProxy on one PostgreSQL, cold (no
# embedding cache) and warm (the shared cache filled): throughput, latency
# p50/p99 and the cost of rebuilding a conversation a replica has not seen,
# on real Claude Code and Codex traffic (lam-serve/tests/sdk/bench_replicas.py).
# A benchmark, not a test (docs/deploy.md). Needs haproxy and PostgreSQL
# (scripts/test-deploy.sh installs both).
#
#   bash scripts/bench-replicas.sh [--per-session N]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v haproxy >/dev/null || { echo "haproxy is not installed: LAM_TEST_SYSTEM=1 bash scripts/test-deploy.sh installs it" >&2; exit 1; }
bash scripts/serve-venv.sh
cargo build -q --release -p lam-ctx
t="${LAM_CORPUS:-../shared/corpus}/agent-transcripts"
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-bench-replicas.XXXXXX")"
trap 'rm -rf "$work"' EXIT
bash scripts/test-postgres.sh --with target/serve-venv/bin/python lam-serve/tests/sdk/bench_replicas.py target/release/lam "$work" \
  --transcripts "$t/spotter/4d5611e5-241a-462a-8d15-5122611a9569" "$t/cctrace" \
  "$t/openprintkit/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl" "$@"
