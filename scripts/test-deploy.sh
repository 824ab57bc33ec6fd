#!/usr/bin/env bash
# A deployment as a team would run it (docs/deploy.md): three `lam serve`
# replicas on one PostgreSQL store and embedding cache behind HAProxy (round
# robin, no affinity), driven by the official SDK clients
# (lam-serve/tests/sdk/deploy_test.py): the bytes forwarded equal one
# replica's, every cited §id recalls exactly from the shared store, and a
# replica killed with SIGKILL mid-stream loses nothing and the retry gets the
# same bytes; then the budget in the same deployment (deploy_budget_test.py:
# replicas and restarts forward identical bytes across cuts). Installs
# haproxy (and PostgreSQL, scripts/test-postgres.sh) from the distribution's
# packages when allowed (CI=true or LAM_TEST_SYSTEM=1); otherwise SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v haproxy >/dev/null; then
  if [[ "${CI:-}" != true && "${LAM_TEST_SYSTEM:-}" != 1 ]]; then
    echo "SKIPPED: the deployment test (haproxy is not installed). Run it with" >&2
    echo "         LAM_TEST_SYSTEM=1 bash scripts/test-deploy.sh   (installs haproxy with apt-get, as CI does)" >&2
    exit 0
  fi
  bash scripts/apt-install.sh "the deployment test" haproxy
fi
bash scripts/serve-venv.sh
bash scripts/build-lam.sh
encoder=$(bash scripts/default-encoder.sh)
corpus="${LAM_CORPUS:-../shared/corpus}"
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-deploy-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
transcripts="$corpus/agent-transcripts"
# One Claude Code session with subagents, one without, one Codex rollout: their first 40 requests each.
bash scripts/test-postgres.sh --with target/serve-venv/bin/python lam-serve/tests/sdk/deploy_test.py target/debug/lam "$corpus" "$work" --encoder "$encoder" \
  --transcripts "$transcripts/spotter/4d5611e5-241a-462a-8d15-5122611a9569" "$transcripts/cctrace" \
  "$transcripts/openprintkit/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl" --per-session 40
# The budget in the same deployment (lam-serve/tests/sdk/deploy_budget_test.py):
# a real Claude Code session's first 90 requests through `lam serve --budget
# 20000 --cache-ttl 8` (several cuts, one after an idle gap longer than the TTL,
# so cold), against an upstream whose `usage` counts 3 bytes a token (the
# calibration is above 1): three replicas behind HAProxy, and one `lam serve`
# SIGKILLed and restarted after every cut, forward the bytes one `lam serve`
# alone forwards (0 bodies differ).
bash scripts/test-postgres.sh --with target/serve-venv/bin/python lam-serve/tests/sdk/deploy_budget_test.py target/debug/lam "$work/compact" --encoder "$encoder" \
  --transcript "$transcripts/spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl" --requests 90 --budget 20000
# The same with each body as a Python client writes it (the official SDKs'
# json.dumps: ", " and ": "): a mark taken off an item a replica froze gives
# the client's own bytes (issue 68: 48 of 90 bodies differed in bytes before).
# A work folder of its own: the reference's folder store of the pass above
# holds the same conversation's ledger (the same points: keys are no function
# of the bytes' spacing), which this pass's reference would read and the
# replicas' fresh PostgreSQL would not. The replicas alone: the restarts read
# the same ledger the replicas do, which the pass above checks.
bash scripts/test-postgres.sh --with target/serve-venv/bin/python lam-serve/tests/sdk/deploy_budget_test.py target/debug/lam "$work/spaced" --encoder "$encoder" \
  --transcript "$transcripts/spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl" --requests 90 --budget 20000 --spaced --no-restarts
