#!/usr/bin/env bash
# Install Debian packages the tests need (`bash scripts/apt-install.sh WHAT
# PACKAGE...`; WHAT names the tests in the messages): as root, with
# apt-get, never starting the packages' own services (policy-rc.d), updating
# the package lists only when the install fails without. The test scripts
# call it only when CI=true or LAM_TEST_SYSTEM=1.
set -euo pipefail
what=$1
shift
if [[ $(id -u) -ne 0 ]]; then
  echo "need root to run apt-get install $* for $what (or install it yourself)" >&2
  exit 1
fi
echo "$* not found; installing from the distribution's packages for $what" >&2
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null || {
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null
}
