#!/usr/bin/env bash
# target/debug/lam for the test scripts: `cargo build -p lam-ctx`, unless
# scripts/test.sh says the binary `cargo test --workspace` just built is
# there (LAM_BUILT=1). That one is the same source built with the whole
# workspace's features (dev-dependencies turn on a few more in tokio, tower
# and lam-core); building it again with lam-ctx's alone would compile most of
# the dependency graph a second time (about 4 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${LAM_BUILT:-}" == 1 && -x target/debug/lam ]]; then
  exit 0
fi
cargo build -q -p lam-ctx
