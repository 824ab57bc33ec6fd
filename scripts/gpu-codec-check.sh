#!/usr/bin/env bash
# One prepared device check for a session lent an NVIDIA GPU: NVRTC from the
# wheel, the CPU/GPU identity test, then the timing table (gpu_bench).
set -euo pipefail
cd "$(dirname "$0")/.."
nvrtc_lib="$(bash scripts/install-gpu-compilers.sh 2>/dev/null || true)"
export LD_LIBRARY_PATH="$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo test --release -p lam-codec --features cuda --test kernels -- --nocapture
cargo run --release -p lam-codec --features cuda --example gpu_bench
