#!/usr/bin/env bash
# Install the GPU *compilers* lam-codec's kernel check needs; no GPU, driver
# or toolkit is involved:
#   - NVRTC from the PyPI wheel nvidia-cuda-nvrtc-cu12 (pinned), with the
#     ordinary pip client, into $LAM_HOME/pip/ (cudarc dlopens libnvrtc.so.12
#     through LD_LIBRARY_PATH);
#   - hiprtc from Debian: ROCm 5.2 in bookworm ships hiprtc inside
#     libamdhip64-5 (there is no separate libhiprtc package), with its
#     builtins in libhiprtc-builtins5 and the device bitcode in
#     rocm-device-libs (needs apt-get, i.e. root; skipped with a note otherwise).
# Idempotent. Prints the directory holding libnvrtc.so.12.
set -euo pipefail
LAM_HOME="${LAM_HOME:-$HOME/.cache/lam}"
PKG=nvidia-cuda-nvrtc-cu12
VER=12.9.86
dest="$LAM_HOME/pip/$PKG-$VER"
lib="$dest/nvidia/cuda_nvrtc/lib"
if [ ! -f "$lib/libnvrtc.so.12" ]; then
  echo "installing $PKG==$VER into $dest" >&2
  rm -rf "$dest.tmp"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dest.tmp" "$PKG==$VER" >&2
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
fi
hip_pkgs="libamdhip64-5 rocm-device-libs libhiprtc-builtins5"
if ! dpkg -s $hip_pkgs >/dev/null 2>&1; then
  if [ "${CI:-}" != true ] && [ "${LAM_TEST_SYSTEM:-}" != 1 ]; then
    echo "SKIPPED: the hiprtc (ROCm) kernel compile check: $hip_pkgs are not installed; LAM_TEST_SYSTEM=1 installs them with apt-get, as CI does" >&2
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing $hip_pkgs (apt)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $hip_pkgs; } >&2
  else
    echo "note: $hip_pkgs not installed (needs root apt-get); the hiprtc check will skip" >&2
  fi
fi
echo "$lib"
