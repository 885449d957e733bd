"""Every source of this part (fstab, LXC, Proxmox, docker, exports, Samba, symlinks) run on the
real test machine against a fresh volume: whatever the host's real files hold (its fstab,
smb.conf, other engineers' LXC and docker state), nothing on the host can name a volume made a
moment ago, and nothing may fail or block the verdict."""

import time

import pytest

from vacate.observing.collectors.configured import docker, exports, fstab, lxc, pve, smb, symlinks
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host


@pytest.mark.root
@pytest.mark.parametrize("source", [fstab, lxc, pve, docker, exports, smb, symlinks],
                         ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_real_host_reads_cleanly(ext4_volume, source):
    target = resolve_target(ext4_volume.mountpoint)
    t0 = time.monotonic()
    consumers, problems = source.collect(Host.local(), target, host_view(target))
    assert time.monotonic() - t0 < 10
    assert consumers == ()
    assert not [p for p in problems if p.blocks_verdict]
