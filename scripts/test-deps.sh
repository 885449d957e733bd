#!/bin/sh
# Install everything the test suite needs: Debian packages for real volumes, holders and
# containers, then the package itself with its test extras. Idempotent; run as root.
set -eu
cd "$(dirname "$0")/.."
PKGS="e2fsprogs xfsprogs btrfs-progs util-linux mount lsof psmisc ncdu gdu zstd tar coreutils findutils"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
