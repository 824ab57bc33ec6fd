#!/usr/bin/env bash
# The real Claude Code, Codex, Gemini CLI and opencode (pinned, from npm:
# scripts/install-agents.sh) run through `lam run` against a scripted
# loopback upstream (Messages, Responses, Gemini API) on a real folder
# (lam/tests/agents/real_agents_test.py): one proxy session per
# conversation, every request through the proxy, admitted = sent, no earlier
# byte changed, an edited file read again with every changed line reaching
# the model, exact recall through lam's MCP tool; with a budget, the agent
# never compacts (and does without lam), and across an idle gap longer than
# --cache-ttl the next request makes a cold cut (the `-budget-cold` runs of
# Claude Code and Codex). Prints a table per agent and writes
# target/agents-report.json. SKIPPED (per agent) when npm is unreachable.
# Then the agents driven interactively in a
# pseudo-terminal (lam/tests/agents/pty_test.py: turns, Esc, exit keys,
# hang-up, kill, resume; all four agents, about a minute each for Claude Code
# and Codex, one for Gemini CLI and opencode, two with LAM_PTY_TEST=all;
# LAM_PTY_TEST=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-agents.sh
bash scripts/build-lam.sh
encoder=$(bash scripts/default-encoder.sh)
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-agents-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
python3 lam/tests/agents/real_agents_test.py target/debug/lam target/agents "$work" target/agents-report.json --encoder "$encoder" "$@"
# The pseudo-terminal run (pty_test.py): on by default; LAM_PTY_TEST=0 skips it.
# Claude Code and Codex: every scenario. Gemini CLI and opencode: the
# lifecycle ones (two turns, exit at once, kill, resume; esc, faults and
# hang-up, about 2 minutes more, with LAM_PTY_TEST=all), to keep the test
# command within its time.
if [ "${LAM_PTY_TEST:-1}" != 0 ]; then
  bash scripts/pty-venv.sh
  py=target/pty-venv/bin/python
  [ -x "$py" ] || py=python3
  "$py" lam/tests/agents/pty_test.py target/debug/lam target/agents "$work" --encoder "$encoder" --only claude,codex
  more=(--scenarios two-turns,exit-at-once,kill,resume)
  [ "${LAM_PTY_TEST:-1}" = all ] && more=()
  "$py" lam/tests/agents/pty_test.py target/debug/lam target/agents "$work" --encoder "$encoder" --only gemini,opencode "${more[@]}"
fi
