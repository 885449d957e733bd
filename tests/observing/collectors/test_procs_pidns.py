"""A holder in private pid and mount namespaces that no runtime names (``unshare --pid
--mount``, as a booted systemd in a box is): its container is that namespace's PID 1, whose
fstab is read through ``/proc/INIT/root``; a file it shares with the host is reported once, as
the host's, while a file of its own with the same text is reported as its own."""

import os
import shutil
import tempfile

import pytest
from harness.holders import Holders

from vacate.observing.host import Host
from vacate.observing.model.usage import ContainerRoot
from vacate.observing.observe import observe

pytestmark = [pytest.mark.root]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out += [int(x) for x in f.read().split()]
    return out


@pytest.fixture
def setup(ext4_volume):
    vol = ext4_volume.mountpoint
    work = os.path.join(vol, "work")
    os.makedirs(work)
    tmp = tempfile.mkdtemp(prefix="vacate-pidns-")
    h = Holders(vol)
    try:
        yield vol, work, tmp, h
    finally:
        h.close()
        shutil.rmtree(tmp, ignore_errors=True)


def etc_with_fstab(tmp: str, name: str, vol: str) -> str:
    d = os.path.join(tmp, name)
    os.makedirs(d)
    with open(os.path.join(d, "fstab"), "w") as f:
        f.write(f"{vol}/work /srv/pidns-work none bind 0 0\n")
    return d


def boxed(h: Holders, tmp: str, cwd: str, etc_dir: str) -> int:
    """``sleep`` as PID 1 of new pid and mount namespaces whose ``/etc`` is ``etc_dir``, its
    cwd ``cwd``; its host pid."""
    flag = os.path.join(tmp, "ready")
    script = f"mount --bind {etc_dir} /etc && : > {flag} && exec sleep 1d"
    outer = h.spawn("box", ["unshare", "--pid", "--fork", "--mount", "--propagation", "private",
                            "sh", "-c", script], ready=flag, cwd=cwd)
    kids = _children(outer)
    assert len(kids) == 1
    return kids[0]


def fstab_ids(obs) -> list[str]:
    return sorted(c.id for c in obs.consumers if c.type == "fstab")


def test_the_holder_is_in_its_namespace_init_and_a_shared_fstab_is_the_hosts(setup):
    vol, work, tmp, h = setup
    etc = etc_with_fstab(tmp, "etc", vol)
    init = boxed(h, tmp, work, etc)
    obs = observe(vol, host=Host(etc=etc), scan_tree=False)
    proc = [c for c in obs.consumers if c.type == "process" and c.attrs.pid == init]
    assert proc, "the sleep holding the volume in its namespaces is not seen"
    a = proc[0].attrs
    assert a.container == {"type": "pidns", "name": str(init), "init_pid": init}
    assert a.pid_namespace == os.readlink(f"/proc/{init}/ns/pid")
    assert ("pidns", str(init), init) in {(c.type, c.name, c.init_pid) for c in obs.containers}
    # the box's /etc/fstab is the host's own file: one consumer, the host's
    assert fstab_ids(obs) == ["fstab:/etc/fstab:1"]


def test_a_fstab_of_its_own_with_the_same_line_is_its_own(setup):
    vol, work, tmp, h = setup
    host_etc = etc_with_fstab(tmp, "host-etc", vol)
    box_etc = etc_with_fstab(tmp, "box-etc", vol)      # same text, another file
    init = boxed(h, tmp, work, box_etc)
    obs = observe(vol, host=Host(etc=host_etc), scan_tree=False)
    assert fstab_ids(obs) == ["fstab:/etc/fstab:1", f"fstab:pidns:{init}:/etc/fstab:1"]
    mine = next(c for c in obs.consumers if c.id == f"fstab:pidns:{init}:/etc/fstab:1")
    assert mine.attrs.container == {"type": "pidns", "name": str(init), "init_pid": init}


def test_a_process_entered_into_the_namespace_finds_its_pid1(setup):
    """A process put into the namespace with ``nsenter`` (its parent is outside it, so its
    ancestors do not lead to the namespace's PID 1, which holds nothing here)."""
    vol, work, tmp, h = setup
    etc = etc_with_fstab(tmp, "etc", vol)
    init = boxed(h, tmp, tmp, etc)
    flag = os.path.join(tmp, "entered")
    entered = h.spawn("entered", ["nsenter", "-t", str(init), "--pid", "--mount", "sh", "-c",
                                  f"cd {work} && : > {flag} && exec sleep 1d"], ready=flag)
    obs = observe(vol, host=Host(etc=etc), scan_tree=False)
    procs = [c for c in obs.consumers if c.type == "process"]
    assert [c.attrs.ppid for c in procs] == [entered]      # the sleep nsenter forked
    assert procs[0].attrs.container == {"type": "pidns", "name": str(init), "init_pid": init}
    assert [c for c in obs.containers if c.type == "pidns"] == [
        ContainerRoot("pidns", str(init), init)]
