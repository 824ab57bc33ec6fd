#!/usr/bin/env bash
# The upstream's network through a real `lam serve` and `lam run`
# (lam-serve/tests/net/net_test.py): nginx from the distribution serves
# HTTP/2 over TLS with a certificate of a private CA made here (openssl), in
# front of a loopback streaming stub. Trust: refused without the CA, accepted
# with SSL_CERT_FILE, SSL_CERT_DIR, --upstream-ca, NODE_EXTRA_CA_CERTS under
# `lam run`, and the system's store. GOAWAY: `keepalive_requests 5` under
# bursts of 20 streaming requests, 100 under bursts of 7: none may fail, none
# may reach the upstream twice. A proxy's 407: lam's own 502 naming the proxy.
# About 10 seconds once nginx is there. Installs nginx with apt-get, and
# puts the test CA into the system's store (/usr/local/share/ca-certificates,
# update-ca-certificates; removed again at the end), only when CI=true or
# LAM_TEST_SYSTEM=1; otherwise SKIPPED (the whole test without nginx, the
# system store case without root or that permission).
set -euo pipefail
cd "$(dirname "$0")/.."
allowed=0
if [[ "${CI:-}" == true || "${LAM_TEST_SYSTEM:-}" == 1 ]]; then allowed=1; fi
nginx=$(command -v nginx || { [[ -x /usr/sbin/nginx ]] && echo /usr/sbin/nginx; } || true)
if [[ -z "$nginx" ]]; then
  if [[ $allowed != 1 ]]; then
    echo "SKIPPED: the network tests (nginx is not installed). Run them with" >&2
    echo "         LAM_TEST_SYSTEM=1 bash scripts/test-network.sh   (installs nginx with apt-get, as CI does)" >&2
    exit 0
  fi
  bash scripts/apt-install.sh "the network tests" nginx openssl ca-certificates
  nginx=/usr/sbin/nginx
fi
system=()
if [[ $allowed == 1 && $(id -u) -eq 0 ]] && command -v update-ca-certificates >/dev/null; then system=(--system); fi
bash scripts/build-lam.sh
work="$(mktemp -d "${TMPDIR:-/tmp}/lam-net-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
python3 lam-serve/tests/net/net_test.py target/debug/lam "$work" --nginx "$nginx" "${system[@]}"
