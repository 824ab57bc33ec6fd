#!/usr/bin/env bash
# ONNX Runtime for lam-encode's `ort` feature, all from PyPI with the ordinary
# pip client (pinned, version-checked), into $LAM_HOME (default ~/.cache/lam):
#   - onnxruntime and onnx (+ numpy, protobuf) under $LAM_HOME/pip/, with the
#     wheel's libonnxruntime.so linked at $LAM_HOME/lib/libonnxruntime.so
#     (where OrtEncoder looks when ORT_DYLIB_PATH is unset);
#   - MODEL_DIR/onnx/model.onnx, built from MODEL_DIR's config.json and
#     model.safetensors by scripts/build_onnx.py (no torch) and checked there
#     against a numpy forward pass. MODEL_DIR: the first argument, else the
#     default model that scripts/install-model.sh installs.
# Idempotent. Prints `export ORT_DYLIB_PATH=...`:
#   eval "$(bash scripts/install-onnx.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."
LAM_HOME="${LAM_HOME:-$HOME/.cache/lam}"
export LAM_HOME
ORT_VER=1.31.1   # ONNX Runtime API 31, what `ort` 2.0.0-rc.15 with `api-31` expects
ONNX_VER=1.23.2

dest="$LAM_HOME/pip/onnxruntime-$ORT_VER-onnx-$ONNX_VER"
lib="$dest/onnxruntime/capi/libonnxruntime.so.$ORT_VER"

installed() {
  [ -f "$lib" ] && PYTHONPATH="$dest" python3 -c "
import sys, onnxruntime, onnx
sys.exit(0 if (onnxruntime.__version__, onnx.__version__) == ('$ORT_VER', '$ONNX_VER') else 1)" 2>/dev/null
}

if ! installed; then
  echo "installing onnxruntime==$ORT_VER onnx==$ONNX_VER into $dest" >&2
  mkdir -p "$LAM_HOME/pip"
  tmp="$(mktemp -d "$LAM_HOME/pip/.tmp.XXXXXX")"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$tmp" \
    "onnxruntime==$ORT_VER" "onnx==$ONNX_VER" >&2
  rm -rf "$dest"
  mv "$tmp" "$dest"
  if ! installed; then
    echo "error: onnxruntime==$ORT_VER / onnx==$ONNX_VER not importable from $dest, or $lib missing" >&2
    exit 1
  fi
fi
mkdir -p "$LAM_HOME/lib"
ln -sfn "$lib" "$LAM_HOME/lib/libonnxruntime.so"

if [ $# -ge 1 ]; then
  model="$1"
else
  model="$(bash scripts/install-model.sh)"
fi
out="$model/onnx/model.onnx"
# Rebuild when the builder, the config or the weights change.
stamp="$(cat scripts/build_onnx.py "$model/config.json" "$model/model.safetensors" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$out" ] || [ "$(cat "$out.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "building $out" >&2
  mkdir -p "$model/onnx"
  PYTHONPATH="$dest" python3 scripts/build_onnx.py "$model" "$out" --check >/dev/null
  echo "$stamp" > "$out.stamp"
fi
echo "export ORT_DYLIB_PATH=$LAM_HOME/lib/libonnxruntime.so"
