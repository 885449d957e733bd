#!/bin/sh
# Install everything the test suite needs: Debian packages for real volumes, holders and
# containers, then the package itself with its test extras. Idempotent; run as root.
set -eu
cd "$(dirname "$0")/.."
PKGS="openssh-server sudo tmux e2fsprogs xfsprogs btrfs-progs util-linux mount lsof psmisc ncdu gdu zstd tar coreutils findutils lxc docker.io debootstrap nfs-kernel-server zfs-fuse systemd git gdb qemu-utils rpm fdisk gcc python3-dev python3-venv fuse chromium chromium-driver"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # packages that ship services (docker.io, nfs-kernel-server, lxc) must not start them here:
    # a policy-rc.d that denies starts, removed again if we put it there
    own_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
    [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
fi
# the package and its test extras go into .venv (Debian's own Python refuses a system-wide
# pip install: PEP 668); the tests run with .venv/bin/python -m pytest
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
