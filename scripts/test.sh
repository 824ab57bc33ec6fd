#!/usr/bin/env bash
# Run the tests: installs the default encoder model if it is missing (tests
# compare it with the PyTorch reference), then the whole workspace's tests and
# the dependency hygiene check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-model.sh >/dev/null
cargo test --workspace
cargo xtask check-default-deps
# lam-codec kernels compile with NVRTC and hiprtc (installs both compilers; no GPU needed)
bash scripts/check-kernels.sh
