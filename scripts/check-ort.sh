#!/usr/bin/env bash
# The ONNX Runtime encoder's tests (lam-encode feature `ort`) with the library
# and the ONNX graph installed by scripts/install-onnx.sh: equivalence with the
# PyTorch reference embeddings and the Encoder conformance suite.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash scripts/install-onnx.sh)"
cargo test -p lam-encode --features ort --test ort
