"""Unknown is never safe, in every configured source: a file a config names that is missing is
nothing; one that cannot be read (permissions, a FIFO, a device, larger than the bound) is a
problem that makes the verdict "could not tell" and names the file. On captured host trees;
the permission cases run as ``nobody`` in a forked child (root reads everything)."""

import json
import os
import shutil
import signal
import stat
import tempfile

import pytest
from harness.etc_files import data_target, write

from vacate.observing.collectors import configured, kernel
from vacate.observing.collectors.configured import cron, exports, fstab, lxc, smb, systemd
from vacate.observing.collectors.configured.cfgfiles import MAX_BYTES, read_text
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.host import Host
from vacate.observing.parsers import mountinfo

UNIT = "[Service]\nEnvironmentFile={env}\nExecStart=/usr/bin/app $ARGS\n" \
       "[Install]\nWantedBy=multi-user.target\n"


@pytest.fixture
def root():
    """A host tree every user may read (pytest's tmp_path is private to root)."""
    d = tempfile.mkdtemp(prefix="vacate-reads-")
    os.chmod(d, 0o755)
    write(d, "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
    yield d
    shutil.rmtree(d)


@pytest.fixture
def deadline():
    """A read that blocks (a FIFO opened for reading) fails the test instead of hanging it."""
    def hung(*_a):
        raise TimeoutError("a read blocked")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def source(mod, root):
    t = data_target()
    consumers, problems = mod.collect(Host.under(root), t, host_view(t))
    return {c.id: c for c in consumers}, list(problems)


def blocking(problems):
    return [(p.path, p.blocks_verdict) for p in problems if p.blocks_verdict]


def as_nobody(fn):
    """``fn()``'s JSON-able result, computed in a forked child running as nobody."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                       # the child: never returns
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            out = json.dumps({"ok": fn()})
        except BaseException as e:                     # noqa: BLE001 - reported to the parent
            out = json.dumps({"error": repr(e)})
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = json.loads(f.read() or '{"error": "no answer"}')
    os.waitpid(pid, 0)
    assert "error" not in got, got.get("error")
    return got["ok"]


def problems_as_nobody(mod, root):
    def run():
        _c, problems = source(mod, root)
        return [[p.code, p.path, p.blocks_verdict] for p in problems]
    return as_nobody(run)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="drops to nobody from root")


@needs_root
def test_unreadable_dropin_blocks_instead_of_disappearing(root):
    write(root, "/etc/systemd/system/app.service", "[Service]\nExecStart=/usr/bin/true\n")
    write(root, "/etc/systemd/system/app.service.d/10-wd.conf",
          "[Service]\nWorkingDirectory=/data/app\n", mode=0o000)
    got = problems_as_nobody(systemd, root)
    assert got == [["unreadable-config", "/etc/systemd/system/app.service.d/10-wd.conf", True]]
    # as root the drop-in is read: the unit uses the volume (so hiding it made a safe verdict)
    by_id, problems = source(systemd, root)
    assert by_id["systemd-unit:app.service"].paths == ("/data/app",) and problems == []


@needs_root
def test_unreadable_unit_directory_and_environment_file_block(root):
    write(root, "/etc/systemd/system/app.service", UNIT.format(env="/etc/default/app"))
    write(root, "/etc/default/app", "ARGS=--cache /data/c\n", mode=0o000)
    write(root, "/run/systemd/system/x.service", "[Service]\nExecStart=/data/x\n")
    os.chmod(os.path.join(root, "run/systemd/system"), 0o700)
    got = problems_as_nobody(systemd, root)
    assert sorted(p[1] for p in got if p[2]) == ["/etc/default/app", "/run/systemd/system"]


@needs_root
def test_unreadable_in_every_source_blocks(root):
    write(root, "/etc/cron.d/job", "0 1 * * * root /data/job\n", mode=0o000)
    write(root, "/etc/fstab", "/dev/loop3 /data ext4 defaults 0 0\n", mode=0o000)
    write(root, "/etc/exports", "/data *(ro)\n", mode=0o000)
    write(root, "/etc/samba/smb.conf", "[s]\npath = /data\n", mode=0o000)
    write(root, "/var/lib/lxc/c1/config", "lxc.rootfs.path = dir:/data/c1\n", mode=0o000)
    for mod, path in ((cron, "/etc/cron.d/job"), (fstab, "/etc/fstab"),
                      (exports, "/etc/exports"), (smb, "/etc/samba/smb.conf"),
                      (lxc, "/var/lib/lxc/c1/config")):
        assert [p[1:] for p in problems_as_nobody(mod, root)] == [[path, True]], mod.__name__


def test_missing_files_a_config_names_are_nothing(root):
    write(root, "/etc/systemd/system/app.service",
          "[Service]\nEnvironmentFile=-/etc/default/absent\nExecStart=/data/bin/app\n")
    os.makedirs(os.path.join(root, "etc/systemd/system/app.service.d"))
    os.symlink("/nonexistent.conf", os.path.join(root, "etc/systemd/system/app.service.d/x.conf"))
    os.symlink("/nowhere", os.path.join(root, "etc/systemd/system/gone.service"))
    write(root, "/etc/samba/smb.conf", "[s]\npath = /data/s\ninclude = /etc/samba/absent.conf\n")
    by_id, problems = source(systemd, root)
    assert by_id["systemd-unit:app.service"].paths == ("/data/bin/app",) and problems == []
    by_id, problems = source(smb, root)
    assert "smb-share:s" in by_id and problems == []


@pytest.mark.parametrize("kind", ["fifo", pytest.param("dev-zero", marks=needs_root), "socket",
                                  "directory"])
def test_environment_file_that_is_not_a_file_is_not_read(root, deadline, kind):
    env = os.path.join(root, "etc/default/app")
    os.makedirs(os.path.dirname(env))
    if kind == "fifo":
        os.mkfifo(env)
    elif kind == "dev-zero":                  # the tree's own /dev/zero: links resolve in it
        os.makedirs(os.path.join(root, "dev"))
        os.mknod(os.path.join(root, "dev/zero"), stat.S_IFCHR | 0o666, os.makedev(1, 5))
        os.symlink("/dev/zero", env)
    elif kind == "directory":
        os.mkdir(env)
    else:
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.bind(env)
        s.close()
    write(root, "/etc/systemd/system/app.service", UNIT.format(env="-/etc/default/app"))
    _by_id, problems = source(systemd, root)
    assert blocking(problems) == [("/etc/default/app", True)]
    assert problems[0].message.startswith("could not read /etc/default/app")


def test_config_files_named_by_configs_are_never_opened_blocking(root, deadline):
    """A FIFO in each place a source reads a file because a config named it."""
    for rel in ("/etc/fifo/inc.conf", "/etc/fifo/mounts", "/etc/fifo/smb-inc.conf"):
        os.makedirs(os.path.dirname(os.path.join(root, rel.lstrip("/"))), exist_ok=True)
        os.mkfifo(os.path.join(root, rel.lstrip("/")))
    write(root, "/var/lib/lxc/c1/config", "lxc.include = /etc/fifo/inc.conf\n"
          "lxc.mount.fstab = /etc/fifo/mounts\nlxc.rootfs.path = dir:/srv/c1\n")
    write(root, "/etc/samba/smb.conf", "[global]\ninclude = /etc/fifo/smb-inc.conf\n")
    os.makedirs(os.path.join(root, "etc/cron.d"))
    os.mkfifo(os.path.join(root, "etc/crontab"))
    assert sorted(p for p, _b in blocking(source(lxc, root)[1])) == [
        "/etc/fifo/inc.conf", "/etc/fifo/mounts"]
    assert blocking(source(smb, root)[1]) == [("/etc/fifo/smb-inc.conf", True)]
    assert blocking(source(cron, root)[1]) == [("/etc/crontab", True)]


def test_a_masked_config_linked_to_dev_null_is_empty(root):
    os.makedirs(os.path.join(root, "etc/default"))
    os.symlink("/dev/null", os.path.join(root, "etc/default/app"))
    assert read_text(Host.under(root), os.path.join(root, "etc/default/app")) == ("", None)


def test_a_unit_file_over_the_bound_is_could_not_tell(root):
    """The setting after the padding would be missed: the cut is a blocking problem."""
    pad = "# " + "x" * 1000 + "\n"
    write(root, "/etc/systemd/system/big.service",
          "[Service]\nExecStart=/usr/bin/true\n" + pad * (MAX_BYTES // len(pad) + 10)
          + "WorkingDirectory=/data/after-the-padding\n"
          "[Install]\nWantedBy=multi-user.target\n")
    os.makedirs(os.path.join(root, "etc/systemd/system/multi-user.target.wants"))
    os.symlink("../big.service",
               os.path.join(root, "etc/systemd/system/multi-user.target.wants/big.service"))
    _by_id, problems = source(systemd, root)
    cut = [p for p in problems if p.code == "file-cut"]
    assert [(p.path, p.blocks_verdict) for p in cut] == [("/etc/systemd/system/big.service", True)]


def test_a_free_text_setting_naming_the_volume_is_not_a_use(root):
    write(root, "/etc/systemd/system/doc.service",
          "[Unit]\nDescription=serves the models in /data/models\n"
          "Documentation=file:///data/docs/serve.html man:serve(8)\n"
          "[Service]\nExecStart=/usr/bin/serve\nSyslogIdentifier=/data/x\n")
    write(root, "/etc/systemd/system/real.service",
          "[Unit]\nDescription=/data in prose\n[Service]\nWorkingDirectory=/data/w\n"
          "ExecStart=/usr/bin/true\n")
    by_id, problems = source(systemd, root)
    assert set(by_id) == {"systemd-unit:real.service"} and problems == []
    assert by_id["systemd-unit:real.service"].attrs.fields == {"WorkingDirectory": ["/data/w"]}


def test_configured_collect_keeps_every_source_problem(root, deadline):
    """Through the whole configured collector: a FIFO drop-in in the host's units."""
    write(root, "/proc/self/mountinfo", "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
          "10 1 7:3 / /data rw - ext4 /dev/loop3 rw\n")
    write(root, "/etc/systemd/system/app.service", "[Service]\nExecStart=/usr/bin/true\n")
    os.makedirs(os.path.join(root, "etc/systemd/system/app.service.d"))
    os.mkfifo(os.path.join(root, "etc/systemd/system/app.service.d/override.conf"))
    _c, problems = configured.collect(Host.under(root), data_target())
    assert blocking(problems) == [("/etc/systemd/system/app.service.d/override.conf", True)]


def test_kernel_tables_that_cannot_be_read_block(root, deadline):
    mi = "22 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n95 22 7:3 / /data rw - ext4 /dev/loop3 rw\n"
    write(root, "/proc/self/mountinfo", mi)
    os.mkfifo(os.path.join(root, "proc/swaps"))
    os.makedirs(os.path.join(root, "var/lib/nfs/etab"))          # a directory, not the table
    host = Host.under(root)
    ms, _ = mountinfo.parse(mi)
    target = data_target()
    problems: list = []
    assert kernel.swaps(host, target, ms, problems) == []
    assert kernel.nfs_active(host, target, ms, problems) == []
    assert [(p.path, p.blocks_verdict) for p in problems] == [
        (os.path.join(root, "proc/swaps"), True), (os.path.join(root, "var/lib/nfs/etab"), True)]
    # missing tables (no swap support, no NFS server) are nothing
    os.unlink(os.path.join(root, "proc/swaps"))
    os.rmdir(os.path.join(root, "var/lib/nfs/etab"))
    problems.clear()
    assert kernel.swaps(host, target, ms, problems) == [] and problems == []
    assert kernel.nfs_active(host, target, ms, problems) == [] and problems == []


def test_long_lines_and_paths_are_cut_in_text_and_exact_in_paths(root):
    deep = "/data/" + "/".join(["d" * 200] * 10)          # a 2 KB path on the volume
    fifo = "/etc/" + "/".join(["e" * 200] * 3) + "/env"       # a FIFO with a long name
    write(root, "/etc/systemd/system/long.service",
          f"[Service]\nWorkingDirectory={deep}\nEnvironmentFile={fifo}\n"
          "ExecStart=/usr/bin/x " + "--flag " * 2000 + "\n")
    os.makedirs(os.path.dirname(os.path.join(root, fifo.lstrip("/"))))
    os.mkfifo(os.path.join(root, fifo.lstrip("/")))
    by_id, problems = source(systemd, root)
    c = by_id["systemd-unit:long.service"]
    assert c.paths == (deep,) and c.evidence[0].path == deep
    assert len(c.evidence[0].detail) < 400 and c.evidence[0].detail.endswith("chars]")
    assert [p.path for p in problems] == [fifo]             # the path field is exact
    assert len(problems[0].message) < 500 and "chars]" in problems[0].message


def test_a_container_whose_cgroup_cannot_be_read_is_not_called_stopped(root, deadline):
    write(root, "/var/lib/lxc/c1/config", "lxc.rootfs.path = dir:/data/c1\n")
    os.makedirs(os.path.join(root, "sys/fs/cgroup/lxc.payload.c1"))
    procs = os.path.join(root, "sys/fs/cgroup/lxc.payload.c1/cgroup.procs")
    os.mkfifo(procs)
    by_id, _problems = source(lxc, root)
    assert by_id["lxc-container:c1"].attrs.running is None      # unknown, not stopped
    os.unlink(procs)
    write(root, "/sys/fs/cgroup/lxc.payload.c1/cgroup.procs", "")
    assert source(lxc, root)[0]["lxc-container:c1"].attrs.running is False


@needs_root
def test_an_unreadable_directory_in_the_symlink_search_blocks(root):
    from vacate.observing.collectors.configured import symlinks
    write(root, "/proc/self/mountinfo", "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n")
    os.makedirs(os.path.join(root, "etc/private"))
    os.symlink("/data/x", os.path.join(root, "etc/private/link"))
    os.chmod(os.path.join(root, "etc/private"), 0o700)
    got = problems_as_nobody(symlinks, root)
    assert got == [["unreadable-dir", "/etc/private", True]]
    assert "symlink:/etc/private/link" in source(symlinks, root)[0]    # as root it is seen
