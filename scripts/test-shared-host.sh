#!/usr/bin/env bash
# Two local users on one machine (issue 65): another user's files planted in
# the temporary directory (lam run's private root, the old homes and proxy
# files of the next PIDs, a swapped Gemini CLI settings.json, a stats server)
# never reach your `lam run`'s agent, your LAM_TOKEN or your start, and
# root's `lam run` removes nobody else's files
# (lam/tests/shared_host_test.py). The real Gemini CLI from
# scripts/install-agents.sh when it is there, else a stand-in. Makes two
# users (lamtest-victim, lamtest-attacker) and removes them: only as root
# with CI=true or LAM_TEST_SYSTEM=1, else SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ] || { [ "${CI:-}" != true ] && [ "${LAM_TEST_SYSTEM:-}" != 1 ]; }; then
  echo "SKIPPED: the shared-host test (it adds two users; run it as root with LAM_TEST_SYSTEM=1 bash scripts/test-shared-host.sh, as CI does)" >&2
  exit 0
fi
bash scripts/build-lam.sh
gemini=target/agents/node_modules/.bin/gemini
[ -x "$gemini" ] && gemini="$(readlink -f "$gemini")" || gemini=""
python3 lam/tests/shared_host_test.py target/debug/lam "$gemini"
