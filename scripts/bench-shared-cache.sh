#!/usr/bin/env bash
# What a replica that has not seen a conversation pays to rebuild it, with and
# without the shared embedding cache (--cache postgres://..., docs/postgres.md):
# `lam replay` (default encoder) of the real Claude Code and Codex transcripts
# with no cache, then twice through one shared cache on a throwaway PostgreSQL,
# each run a separate process. The bytes must not move (same removal, same bill);
# the "p50 ms" / "p99 ms" columns are the time lam added per request.
#
#   bash scripts/bench-shared-cache.sh [TRANSCRIPTS]   (needs PostgreSQL: scripts/test-postgres.sh installs it)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${LAM_TEST_PG_URL:-}" ]]; then
    exec bash scripts/test-postgres.sh --with bash "$0" "$@"
fi
transcripts=${1:-../shared/corpus/agent-transcripts}
cargo build -q --release -p lam-ctx
lam=target/release/lam
run() {
    echo "== $1"
    shift
    "$lam" replay "$transcripts" "$@" 2>&1 | grep -E "^total|^In total"
}
run "no cache" --no-cache
run "shared cache, cold (first process)" --cache "$LAM_TEST_PG_URL"
run "shared cache, warm (a second process)" --cache "$LAM_TEST_PG_URL"
