#!/usr/bin/env bash
# `lam mcp` against the official `mcp` Python SDK (PyPI): fills a throwaway
# store with two corpus trajectories and the bundled example (which holds a
# non-UTF-8 observation) (`lam compact --encoder hashing --store`),
# then the SDK's client talks to `target/debug/lam mcp` over stdio and over
# streamable HTTP: tools, every id byte-exact against `lam recall` (whole and
# by parts), recall_meta, catalog pages, tool errors on a session that stays
# usable, and the latency of 200 recalls. Reuses target/debug/lam when
# `cargo test --workspace` has built it; the venv lives in target/mcp-venv.
set -euo pipefail
cd "$(dirname "$0")/.."

lam=target/debug/lam
bash scripts/build-lam.sh
venv=target/mcp-venv
if ! "$venv/bin/python" -c 'import mcp.client.streamable_http' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'mcp>=1.9,<2'
fi

corpus=${LAM_CORPUS:-../shared/corpus}
trajs=("$corpus/mini-swe-agent-gemini3pro-swebench-verified/trajs/pydata__xarray-3305.traj.json.gz"
       "$corpus/swe-agent-demos/trajectories/demonstrations/function_calling_simple.traj"
       examples/edit-session.jsonl)  # holds a non-UTF-8 observation
tmp=$(mktemp -d /tmp/lam-mcp.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$lam" compact --encoder hashing --no-cache --store "$tmp/store" "${trajs[@]}" >/dev/null
# Small parts, so that many observations have several.
"$venv/bin/python" scripts/mcp_client_test.py "$lam" "$tmp/store" 64
