#!/usr/bin/env bash
# The pages lam draws, in a real browser: headless Chromium from the
# distribution's packages, driven by playwright-core (pinned, from npm, into
# target/browser-test). `lam replay --html` of the bundled example and of a
# real Claude Code session (../shared/corpus), each with a budget so it cuts:
# no console error, no network request, every figure equal to `--json`'s, a
# `§id` link opening the exact original (`lam recall`), a screenshot
# (target/browser-test/*.png; docs/replay-page.png is the example's).
# Installs chromium when allowed (CI=true or LAM_TEST_SYSTEM=1); otherwise,
# or when npm is unreachable, SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."
chromium=${LAM_CHROMIUM:-/usr/bin/chromium}
if [[ ! -x "$chromium" ]]; then
  if [[ "${CI:-}" != true && "${LAM_TEST_SYSTEM:-}" != 1 ]]; then
    echo "SKIPPED: the browser tests (chromium is not installed). Run them with" >&2
    echo "         LAM_TEST_SYSTEM=1 bash scripts/test-browser.sh   (installs chromium with apt-get, as CI does)" >&2
    exit 0
  fi
  bash scripts/apt-install.sh "the browser tests" chromium
fi
out=target/browser-test
mkdir -p "$out"
if [[ ! -d "$out/node_modules/playwright-core" ]] && ! npm install --prefix "$out" --no-audit --no-fund --silent playwright-core@1.65.2; then
  echo "SKIPPED: the browser tests (npm could not install playwright-core)" >&2
  exit 0
fi
bash scripts/build-lam.sh
encoder=$(bash scripts/default-encoder.sh)
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-browser-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp lam/tests/browser/replay_page.mjs "$out/"
page() { # NAME TRANSCRIPT BUDGET ENCODER
  target/debug/lam replay "$2" --budget "$3" --encoder "$4" --store "$work/$1-store" --json --html "$work/$1.html" > "$work/$1.json"
  LAM_CHROMIUM="$chromium" node "$out/replay_page.mjs" "$work/$1.html" "$work/$1.json" target/debug/lam "$work/$1-store" "$out/$1.png"
}
page example examples/edit-session.jsonl 3000 "$encoder"
# 245 requests: the hashing encoder (the page, not the encoder, is under test here).
page spotter "${LAM_CORPUS:-../shared/corpus}/agent-transcripts/spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl" 20000 hashing
