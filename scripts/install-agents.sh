#!/usr/bin/env bash
# Installs the real agents the real-agent tests drive, pinned, from the npm
# registry into target/agents (git-ignored): Claude Code and Codex, each of
# which ships its native binary inside a registry package. Idempotent: does
# nothing when the pinned versions are there. When the registry cannot be
# reached it prints SKIPPED and exits 0 (the tests then say SKIPPED too).
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_CODE=2.1.332
CODEX=0.171.0
dir=target/agents
bin=$dir/node_modules/.bin
have() { [ -x "$bin/claude" ] && [ -x "$bin/codex" ] \
  && "$bin/claude" --version 2>/dev/null | grep -q "^$CLAUDE_CODE" \
  && "$bin/codex" --version 2>/dev/null | grep -q " $CODEX\$"; }
if have; then
  echo "agents: Claude Code $CLAUDE_CODE and Codex $CODEX already in $dir" >&2
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "SKIPPED: agents: npm is not installed (needed to install Claude Code and Codex)" >&2
  exit 0
fi
if ! timeout 60 npm view "@anthropic-ai/claude-code@$CLAUDE_CODE" version >/dev/null 2>&1; then
  echo "SKIPPED: agents: the npm registry is unreachable; the real-agent tests will be skipped" >&2
  exit 0
fi
mkdir -p "$dir"
echo "agents: installing @anthropic-ai/claude-code@$CLAUDE_CODE and @openai/codex@$CODEX into $dir (about 500 MB)" >&2
npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
  "@anthropic-ai/claude-code@$CLAUDE_CODE" "@openai/codex@$CODEX" >&2
have || { echo "agents: installed, but \`claude --version\` / \`codex --version\` do not report $CLAUDE_CODE / $CODEX" >&2; exit 1; }
echo "agents: $("$bin/claude" --version), $("$bin/codex" --version)" >&2
