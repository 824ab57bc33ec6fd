#!/usr/bin/env bash
# Installs the real agents the real-agent tests drive, pinned, from the npm
# registry into target/agents (git-ignored): Claude Code and Codex (each
# ships its native binary inside a registry package), Gemini CLI (a Node
# bundle) and opencode (a Bun-compiled binary in a platform package).
# Idempotent: does nothing, and needs no network, when the pinned versions
# are there. When the registry cannot be reached it prints SKIPPED and exits
# 0 (the tests then skip the agents that are missing, saying so). All four
# are installed by one `npm install`: npm removes from the prefix what a
# later install does not name.
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_CODE=2.1.332
CODEX=0.171.0
GEMINI_CLI=0.61.0
OPENCODE=1.18.33
dir=target/agents
bin=$dir/node_modules/.bin
# `version PROGRAM PATTERN`: the program is installed and prints the pinned version.
version() { [ -x "$bin/$1" ] && "$bin/$1" --version 2>/dev/null | grep -q "$2"; }
have() { version claude "^$CLAUDE_CODE" && version codex " $CODEX\$" \
  && version gemini "^$GEMINI_CLI\$" && version opencode "^$OPENCODE\$"; }
names="Claude Code $CLAUDE_CODE, Codex $CODEX, Gemini CLI $GEMINI_CLI and opencode $OPENCODE"
if have; then
  echo "agents: $names already in $dir" >&2
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "SKIPPED: agents: npm is not installed (needed to install $names)" >&2
  exit 0
fi
if ! timeout 60 npm view "@anthropic-ai/claude-code@$CLAUDE_CODE" version >/dev/null 2>&1; then
  echo "SKIPPED: agents: the npm registry is unreachable; the real-agent tests will skip the agents not installed" >&2
  exit 0
fi
mkdir -p "$dir"
echo "agents: installing $names into $dir (about 800 MB)" >&2
npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
  "@anthropic-ai/claude-code@$CLAUDE_CODE" "@openai/codex@$CODEX" \
  "@google/gemini-cli@$GEMINI_CLI" "opencode-ai@$OPENCODE" >&2
have || { echo "agents: installed, but the agents' --version do not all report $names" >&2; exit 1; }
echo "agents: $("$bin/claude" --version), $("$bin/codex" --version), gemini $("$bin/gemini" --version), opencode $("$bin/opencode" --version)" >&2
