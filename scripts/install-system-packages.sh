#!/usr/bin/env bash
# The system packages the tests need, from Debian's archive:
#   chromium, fonts-dejavu-core   the browser tests (tests/web/test_browser.py); no tool downloads its own browser
#   bubblewrap                    the verifier's sandbox for user code (evaluators/verify/sandbox.py)
#   postgresql                    the shared-database tests (a throwaway server made with initdb/pg_ctl)
# Distribution packages are signed, updated with the system, and work offline afterwards.
# Idempotent: installs only what is missing, and does nothing when all of it is there.
set -euo pipefail

need=()
[ -x /usr/bin/chromium ] || need+=(chromium fonts-dejavu-core)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)

if [ ${#need[@]} -eq 0 ]; then
    echo "system packages present: $(/usr/bin/chromium --version 2>/dev/null || echo chromium), $(bwrap --version), $(ls -d /usr/lib/postgresql/*/ | head -1)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: installing ${need[*]} needs root (apt-get); run this script as root or install sudo." >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# Try with the package lists at hand first: an update is slow and often not needed.
$SUDO apt-get install -y --no-install-recommends "${need[@]}" || {
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends "${need[@]}"
}
