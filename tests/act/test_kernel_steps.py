"""The kernel steps of a teardown for real, as the plan builds them from a real observation:
a swap file (its name with a space), a loop device backed by a file on the volume and mounted,
a nested tmpfs, a bind of the volume in a private mount namespace, an NFS export; then the
volume's own unmount and the lock on its mount point. Each step is done once, twice is once,
and what stands in the way (a busy mount, a mounted loop device, a mount on top) is refused
with the reason and changes nothing."""

import os
import subprocess
from types import SimpleNamespace

import pytest
from harness.holders import Holders
from harness.volumes import can_loop_mount, make_volume

from vacate.act import kernel, lockdir
from vacate.act.base import Context
from vacate.act.kind import carry_out
from vacate.decide.plan import make_plan
from vacate.decide.request import PlanRequest
from vacate.observing.model.conditions import Backing, Immutable, Unmounted
from vacate.observing.observe import observe

pytestmark = pytest.mark.root


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def mounted_at(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split(" ")[4] == path.replace(" ", "\\040") for line in f)


def active_swaps():
    with open("/proc/swaps") as f:
        return [line.split()[0].replace("\\040", " ") for line in f.readlines()[1:]]


def backing(dev):
    try:
        with open(f"/sys/block/{os.path.basename(dev)}/loop/backing_file") as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def exported(path):
    with open("/var/lib/nfs/etab") as f:
        return any(line.split("\t")[0] == path for line in f)


@pytest.fixture
def setup(tmp_path):
    if not can_loop_mount():
        pytest.skip("needs root and losetup")
    v = make_volume("ext4", size_mb=96)
    h = Holders(v.mountpoint)
    m = v.mountpoint
    spec = f"127.0.0.1:{m}/shared"
    try:
        for d in ("images", "shared", "lmnt", "work"):
            os.makedirs(f"{m}/{d}")
        h.swapfile(f"{m}/swap file", "ext4", mb=8)
        dev = h.loop_device(f"{m}/images/nested.img")
        sh("mkfs.ext4", "-q", dev)
        v.extra_mounts.append(f"{m}/lmnt")
        sh("mount", dev, f"{m}/lmnt")
        v.mount_tmpfs("scratch")
        # a private mount namespace that sees a subdirectory of the volume through a bind
        where = os.path.join(h.tmp, "ns-view")
        os.makedirs(where)
        flag = os.path.join(h.tmp, "ns.ready")
        script = (f"mount --bind '{m}/shared' '{where}' && umount -l '{m}' && "
                  f": > '{flag}' && exec sleep 1d")
        ns_pid = h.spawn("ns", ["unshare", "-m", "--propagation", "private", "bash", "-c",
                                script], ready=flag)
        sh("exportfs", "-o", "ro,no_subtree_check", spec)
        yield SimpleNamespace(v=v, h=h, dev=dev, ns_pid=ns_pid, where=where, dest=str(tmp_path))
    finally:
        sh("exportfs", "-u", spec, check=False)
        h.close()
        sh("chattr", "-i", m, check=False)
        v.close()


def plan_for(mnt, archive_to):
    obs = observe(mnt, scan_tree=False)
    return make_plan(obs, PlanRequest(archive_to=archive_to))


def kernel_steps(plan):
    return [s for s in plan.steps if s.kind in {k.name for k in kernel.KINDS}]


def test_the_kernel_steps_release_everything_and_twice_is_once(setup):
    m, dev, ns_pid, where = setup.v.mountpoint, setup.dev, setup.ns_pid, setup.where
    plan = plan_for(m, setup.dest)
    steps = kernel_steps(plan)
    target = steps[-1]
    assert target.precondition.dev and target.postcondition == Unmounted(False)
    kinds = {(s.kind, s.action.argv[-1], s.action.where.kind) for s in steps}
    assert {("swapoff", f"{m}/swap file", "host"), ("detach-loop", dev, "host"),
            ("unmount", f"{m}/lmnt", "host"), ("unmount", f"{m}/scratch", "host"),
            ("unmount", where, "mount-namespace"), ("unexport", f"127.0.0.1:{m}/shared", "host"),
            ("unmount", m, "host")} == kinds
    ctx = Context(plan)
    outcomes = []
    for s in steps:
        before = kernel.done(s, ctx)
        out = carry_out(s, ctx)
        outcomes.append((s.id, out.status, out.detail))
        assert out.status in ("ok", "skipped"), outcomes
        assert (out.status == "skipped") == before
        assert kernel.done(s, ctx), s.id
    # only the loop device's own unmount of lmnt, and the nested mount's, name the same mount
    assert [o[1] for o in outcomes].count("skipped") <= 1, outcomes
    assert f"{m}/swap file" not in active_swaps()
    assert backing(dev) is None
    assert not mounted_at(m) and not mounted_at(f"{m}/scratch")
    with open(f"/proc/{ns_pid}/mountinfo") as f:
        assert where not in f.read()
    assert not exported(f"{m}/shared")
    assert ("umount", m) in ctx.commands and not any("-l" in c for c in ctx.commands)
    assert ("nsenter", "-t", str(ns_pid), "-m", "umount", where) in ctx.commands

    # twice is once: every step is done, a run changes nothing and runs nothing
    ran = len(ctx.commands)
    for s in steps:
        assert kernel.done(s, ctx)
        assert carry_out(s, ctx).status == "skipped"
    assert len(ctx.commands) == ran

    # the empty mount point is locked against writes into /
    (lock,) = [s for s in plan.steps if s.kind == "lock-dir"]
    assert not lockdir.done(lock, ctx) and lockdir.ready(lock, ctx) is None
    assert carry_out(lock, ctx).status == "ok"
    assert "i" in sh("lsattr", "-d", m).stdout.split()[0]
    with pytest.raises(PermissionError):
        os.open(os.path.join(m, "written-into-root"), os.O_WRONLY | os.O_CREAT, 0o644)
    assert lockdir.done(lock, ctx) and carry_out(lock, ctx).status == "skipped"


def test_what_stands_in_the_way_is_refused_and_nothing_lazy_happens(setup):
    m, h, dev, where = setup.v.mountpoint, setup.h, setup.dev, setup.where
    h.fd(f"{m}/scratch")                       # a process working in the nested tmpfs
    plan = plan_for(m, setup.dest)
    by = {(s.kind, s.action.argv[-1]): s for s in kernel_steps(plan)}
    ctx = Context(plan)

    # the loop device is mounted: detaching it is refused before anything runs
    loop = by[("detach-loop", dev)]
    assert "still mounted at " + f"{m}/lmnt" in kernel.ready(loop, ctx)
    out = carry_out(loop, ctx)
    assert out.status == "failed" and "still mounted" in out.detail
    assert backing(dev) == f"{m}/images/nested.img" and ctx.commands == []

    # a busy mount: umount fails, the mount stays where it is (never detached lazily)
    scratch = next(s for s in plan.steps if s.kind == "unmount" and
                   s.action.argv[-1] == f"{m}/scratch")
    assert kernel.ready(scratch, ctx) is None
    out = carry_out(scratch, ctx)
    assert out.status == "failed" and "busy" in out.detail
    assert mounted_at(f"{m}/scratch") and not kernel.done(scratch, ctx)

    # something mounted over it: refused, named
    sh("mount", "-t", "tmpfs", "over", f"{m}/scratch")
    try:
        assert f"mounted on {m}/scratch still: {m}/scratch" in kernel.ready(scratch, ctx)
    finally:
        sh("umount", f"{m}/scratch")
    h.stop("fd")
    assert carry_out(scratch, ctx).status == "ok" and not mounted_at(f"{m}/scratch")

    # the volume's own unmount is refused while mounts remain on it
    target = next(s for s in plan.steps if s.id.endswith("unmount")
                  and isinstance(s.postcondition, Unmounted))
    assert "mounted on " + m in kernel.ready(target, ctx)

    # the namespace's only process ended: the namespace and its mounts went with it
    ns_step = by[("unmount", where)]
    h.stop("ns")
    assert kernel.done(ns_step, ctx)
    assert "has ended" in kernel.ready(ns_step, ctx)


def test_a_loop_device_backed_by_another_file_is_not_ours_and_a_missing_swap_is_not_ready(
        setup):
    import dataclasses

    m, dev = setup.v.mountpoint, setup.dev
    plan = plan_for(m, setup.dest)
    by = {(s.kind, s.action.argv[-1]): s for s in kernel_steps(plan)}
    ctx = Context(plan)
    loop = by[("detach-loop", dev)]

    def planned_as(path):
        a = dataclasses.replace(loop.action, precondition=Backing(path))
        return dataclasses.replace(loop, action=a, precondition=a.precondition)

    with open(f"{m}/images/other.img", "wb") as f:
        f.truncate(1 << 20)
    os.link(f"{m}/images/nested.img", f"{m}/images/same-inode.img")
    other = planned_as(f"{m}/images/other.img")
    assert kernel.done(other, ctx)                         # backed by another file: not ours
    assert carry_out(other, ctx).status == "skipped" and ctx.commands == []
    same = planned_as(f"{m}/images/same-inode.img")        # spelled otherwise, the same file
    assert not kernel.done(same, ctx)
    assert "still mounted" in kernel.ready(same, ctx)

    swap = by[("swapoff", f"{m}/swap file")]
    sh("swapoff", f"{m}/swap file")
    assert kernel.done(swap, ctx)
    assert kernel.ready(swap, ctx) == f"{m}/swap file is not an active swap"


def lock_step(path):
    """The lock-dir step as the teardown makes it."""
    from vacate.observing.model.plan import Step
    from vacate.observing.model.steps import LockDir
    return Step(id="19-lock-dir", kind="lock-dir", summary=f"make the empty {path} immutable",
                downtime=True, params=LockDir(path), postcondition=Immutable(True))


def test_lock_dir_never_on_a_mount_point_or_a_directory_with_something_in_it(ext4_volume):
    m = ext4_volume.mountpoint
    step, ctx = lock_step(m), Context(None)
    assert not lockdir.done(step, ctx)
    assert lockdir.ready(step, ctx) == f"{m} is still a mount point"
    assert carry_out(step, ctx).status == "failed" and ctx.commands == []
    sh("umount", m)
    with open(os.path.join(m, "written-meanwhile"), "w") as f:     # now on the root fs
        f.write("x")
    assert "is not empty (1 entries: written-meanwhile)" in lockdir.ready(step, ctx)
    out = carry_out(step, ctx)
    assert out.status == "failed" and ctx.commands == []
    assert "i" not in sh("lsattr", "-d", m).stdout.split()[0]
    os.unlink(os.path.join(m, "written-meanwhile"))


def test_lock_dir_where_the_filesystem_has_no_immutable_flag(tmp_path):
    from harness.fusefs import can_fuse, fuse_mount
    if not can_fuse():
        pytest.skip("needs root, /dev/fuse, fusermount and mfusepy")
    mnt = str(tmp_path / "fuse")
    os.mkdir(mnt)
    with fuse_mount(mnt):
        d = os.path.join(mnt, "empty")
        os.mkdir(d)
        step, ctx = lock_step(d), Context(None)
        assert lockdir.ready(step, ctx) is None
        assert lockdir.done(step, ctx)              # nothing more can be done there
        out = carry_out(step, ctx)
        assert out.status == "skipped" and "does not support chattr +i" in out.detail
