#!/usr/bin/env bash
# One command for a new machine: install the default encoder and run the main
# job (`lam compact`) on the bundled example session.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-model.sh >/dev/null
cargo run --release -p lam -- compact examples/edit-session.jsonl "$@"
