"""A real ``systemd --system`` as PID 1 of private pid/mount/uts/ipc/net namespaces that share
the host's root filesystem. Needs root.

The box sees the host's files, so it is fenced in:
- ``container=vacate-test`` in its environment puts systemd in container mode (no udev, no
  global swapoff / loop detach at shutdown);
- ``/proc/sys`` is read-only inside (else PID 1 raises the global ``fs.file-max``);
- ``/etc/systemd/system`` is over-mounted inside by the box's own unit directory, and
  ``--unit=`` names the box's own target whose units have ``DefaultDependencies=no``:
  ``sysinit.target`` is never pulled (tmpfiles would empty the shared ``/tmp``), and the
  sysinit units that write outside the namespaces are masked as well;
- a private mount namespace with slave propagation: mounts made by the box stay inside;
- its own cgroups (``name=systemd`` and the unified hierarchy) removed on close.

``start_box(user_manager=True)`` also starts the system bus (the distribution's ``dbus.socket``)
and ``user@0.service``, root's own manager as a logged-in user has it (its user bus from the
distribution's user ``dbus.socket``, its units in root's box-private home): what
``systemctl --user -M root@`` reaches. Off by default: the other boxes stay as fast.

``SystemdBox.close`` powers it off (SIGRTMIN+4), waits, kills only its own process tree if it
lingers, and removes what it made.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field

SYSTEMD = "/lib/systemd/systemd"
CGROUP_HIERARCHIES = ("systemd", "unified")
MASK = (
    "systemd-tmpfiles-setup.service", "systemd-tmpfiles-setup-dev.service",
    "systemd-tmpfiles-clean.service", "systemd-tmpfiles-clean.timer", "systemd-sysctl.service",
    "systemd-binfmt.service", "systemd-remount-fs.service", "systemd-random-seed.service",
    "systemd-journal-flush.service", "systemd-update-utmp.service", "systemd-sysusers.service",
    "systemd-firstboot.service", "systemd-machine-id-commit.service", "ldconfig.service",
    "swap.target", "lxc-net.service", "lxc.service", "lxc-monitord.service",
    "docker.service", "containerd.service", "nfs-server.service", "rpcbind.service",
    # with a system bus, pam_systemd would start it: a mount namespace of its own
    "systemd-logind.service",
)
TARGET = "vacate-box.target"
# the units a user manager needs, from the distribution, kept off sysinit.target like the rest
USER_MANAGER_UNITS = ("dbus.socket", "dbus.service", "user@.service", "user-runtime-dir@.service")


def available() -> bool:
    return (os.geteuid() == 0 and os.access(SYSTEMD, os.X_OK)
            and shutil.which("unshare") is not None and shutil.which("nsenter") is not None
            and all(os.path.isdir(f"/sys/fs/cgroup/{h}") for h in CGROUP_HIERARCHIES))


@dataclass
class SystemdBox:
    workdir: str
    units_dir: str
    unshare_pid: int
    pid1: int
    cgroups: list[str] = field(default_factory=list)
    log: str = ""
    helpers: list[subprocess.Popen] = field(default_factory=list)   # nsenter'd user managers

    def nsenter(self, *cmd: str, check: bool = False, timeout: float = 30
                ) -> subprocess.CompletedProcess:
        return subprocess.run(["nsenter", "-t", str(self.pid1), "-a", *cmd], check=check,
                              capture_output=True, text=True, timeout=timeout)

    def systemctl(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        return self.nsenter("systemctl", "--no-pager", *args, check=check)

    def wait_running(self, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.systemctl("is-system-running").stdout.strip()
            if state in ("running", "degraded"):
                return state
            time.sleep(0.1)
        raise RuntimeError(f"box systemd not up (state {state!r}); log:\n{self._log_tail()}")

    def user_systemctl(self, *args: str) -> subprocess.CompletedProcess:
        return self.nsenter("env", "XDG_RUNTIME_DIR=/run/user/0", "systemctl", "--user",
                            "--no-pager", *args)

    def user_m(self, *args: str, user: str = "root") -> subprocess.CompletedProcess:
        """``systemctl --user -M USER@ ARGS`` inside the box (``start_box(user_manager=True)``):
        the way vacate reaches a user's manager."""
        return self.nsenter("systemctl", "--user", "-M", f"{user}@", "--no-pager", *args)

    def start_user_manager(self, unit: str = "vacate-user.target", timeout: float = 20.0
                           ) -> None:
        """``systemd --user`` for root inside the box (runtime dir /run/user/0 on the box's
        private /run), starting only ``unit`` (a target in root's box-private home)."""
        self.helpers.append(subprocess.Popen(
            ["nsenter", "-t", str(self.pid1), "-a", "sh", "-c",
             ("mkdir -p -m 700 /run/user/0 && XDG_RUNTIME_DIR=/run/user/0 "
             f"exec {SYSTEMD} --user --unit={unit} --log-target=console --log-level=notice")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.user_systemctl("is-system-running").stdout.strip()
            if state in ("running", "degraded"):
                return
            time.sleep(0.1)
        raise RuntimeError(f"user manager not up (state {state!r})")

    def _log_tail(self) -> str:
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def close(self) -> None:
        for h in self.helpers:
            # the user manager first: its nsenter parent (outside the box) must reap it, or
            # the box's PID 1 waits for that zombie forever
            if h.poll() is None:
                self.user_systemctl("exit")
                try:
                    h.wait(5)
                except subprocess.TimeoutExpired:
                    h.kill()
                    h.wait(5)
        self.helpers.clear()
        try:
            os.kill(self.pid1, signal.SIGRTMIN + 4)      # orderly poweroff of the box
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _alive(self.unshare_pid):
            time.sleep(0.1)
        if _alive(self.unshare_pid):
            # killing PID 1 of the namespace kills every process in it
            try:
                os.kill(self.pid1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and _alive(self.unshare_pid):
                time.sleep(0.05)
        try:
            os.waitpid(self.unshare_pid, os.WNOHANG)
        except ChildProcessError:
            pass
        for cg in reversed(self.cgroups):
            for dirpath, _dirs, _files in sorted(os.walk(cg, topdown=False),
                                                 key=lambda t: -len(t[0])):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
        shutil.rmtree(self.workdir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_user_manager(box: SystemdBox, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    r = None
    while time.monotonic() < deadline:
        r = box.user_m("is-system-running")
        if r.stdout.strip() in ("running", "degraded"):
            return
        time.sleep(0.1)
    raise RuntimeError(f"root's user manager not reached by systemctl --user -M root@: "
                       f"{r and (r.stdout + r.stderr).strip()!r}")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def _launch(units_dir: str, home_dir: str, cgroups: list[str],
            binds: tuple[tuple[str, str], ...], log: str,
            hide: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start the box's systemd as PID 1 of new namespaces, in its cgroups; ``hide``: mounts
    of the host unmounted in there first."""
    inner = (
        "".join(f"{{ umount {p} 2>/dev/null; true; }} && " for p in hide) +
        "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && "
        f"mount --bind {units_dir} /etc/systemd/system && mount --bind {home_dir} /root && "
        + "".join(f"mount --bind {src} {dst} && " for src, dst in binds) +
        "exec env -i container=vacate-test PATH=/usr/sbin:/usr/bin:/sbin:/bin "
        f"{SYSTEMD} --system --unit={TARGET} --log-target=console --log-level=notice"
    )
    join = " ".join(f"echo $$ > {cg}/cgroup.procs;" for cg in cgroups)
    with open(log, "ab") as logf:
        return subprocess.Popen(
            ["sh", "-c", (f"{join} exec unshare --pid --fork --mount-proc --mount "
                          f"--propagation slave --uts --ipc --net sh -c '{inner}'")],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            start_new_session=True)


def _wait_pid1(box: SystemdBox, proc: subprocess.Popen) -> None:
    """``box.pid1`` set once the box's PID 1 is there (never 0 after: close() signals it)."""
    deadline = time.monotonic() + 10
    pid1 = 0
    while time.monotonic() < deadline:
        kids = _children(proc.pid)
        if kids:
            pid1 = kids[0]
            break
        if proc.poll() is not None:
            raise RuntimeError(f"box exited early:\n{box._log_tail()}")
        time.sleep(0.02)
    if not pid1:
        raise RuntimeError("box PID 1 did not appear")
    box.pid1 = pid1
    box.wait_running()


def boot_again(box: SystemdBox, binds: tuple[tuple[str, str], ...] = (),
               hide: tuple[str, ...] = ()) -> None:
    """Boot a box that powered off again, as a container restarts: the same units (as its
    manager left them: disabled ones stay disabled), root's home and cgroups; ``binds`` as
    its config now has them; ``hide``: host mounts a container's own root would not show
    (the box shares the host's). ``box.pid1`` is the new PID 1."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(box.unshare_pid):
        time.sleep(0.1)
    if _alive(box.unshare_pid):
        raise RuntimeError("the box did not power off")
    with contextlib.suppress(ChildProcessError):
        os.waitpid(box.unshare_pid, 0)
    home_dir = os.path.join(box.workdir, "root-home")
    proc = _launch(box.units_dir, home_dir, box.cgroups, binds, box.log, hide)
    box.unshare_pid = proc.pid
    _wait_pid1(box, proc)


def start_box(units: dict[str, str], *, enable: tuple[str, ...] = (),
              files: dict[str, str] | None = None,
              home: dict[str, str] | None = None, cgroup: str | None = None,
              binds: tuple[tuple[str, str], ...] = (), user_manager: bool = False
              ) -> SystemdBox:
    """Boot a box whose ``/etc/systemd/system`` holds ``units`` (name -> text; a name with a
    ``/`` is a drop-in like ``x.service.d/override.conf``) and ``files`` (other files placed in
    the same directory; a text starting with ``->`` makes a symlink), with ``enable`` linked
    into the box's default target. ``home`` (path relative to root's home -> text; a text
    starting with ``->`` makes a symlink) fills a
    private directory mounted over ``/root`` inside the box. ``cgroup``: the name of its
    cgroups (``lxc.payload.129`` makes it Proxmox container 129 to whoever reads
    ``/proc/PID/cgroup``); ``binds``: (source, mount point) bind-mounted inside the box only;
    ``user_manager``: the system bus and ``user@0.service`` started too (see the module's
    docstring), root's units from ``home``'s ``.config/systemd/user``. The caller must
    ``close()`` it."""
    workdir = tempfile.mkdtemp(prefix="vacate-systemd-box-")
    home_dir = os.path.join(workdir, "root-home")
    os.makedirs(home_dir, mode=0o700)
    for rel, text in (home or {}).items():
        path = os.path.join(home_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if text.startswith("->"):
            os.symlink(text[2:], path)
        else:
            with open(path, "w") as f:
                f.write(text)
    units_dir = os.path.join(workdir, "etc-systemd-system")
    os.makedirs(os.path.join(units_dir, f"{TARGET}.wants"))
    for u in MASK:
        os.symlink("/dev/null", os.path.join(units_dir, u))
    with open(os.path.join(units_dir, TARGET), "w") as f:
        f.write("[Unit]\nDescription=vacate test box\nDefaultDependencies=no\n")
    if user_manager:
        units = {**{f"{u}.d/vacate-box.conf": "[Unit]\nDefaultDependencies=no\n"
                    for u in USER_MANAGER_UNITS}, **units}
    for name, text in {**units, **(files or {})}.items():
        path = os.path.join(units_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if text.startswith("->"):
            os.symlink(text[2:], path)
            continue
        with open(path, "w") as f:
            f.write(text)
    for name in enable:
        os.symlink(f"../{name}" if "@" not in name else f"../{name.split('@')[0]}@."
                   f"{name.rsplit('.', 1)[1]}",
                   os.path.join(units_dir, f"{TARGET}.wants", name))
    tag = cgroup or f"vacate-box-{uuid.uuid4().hex[:8]}"
    cgroups = [f"/sys/fs/cgroup/{h}/{tag}" for h in CGROUP_HIERARCHIES]
    for cg in cgroups:
        os.makedirs(cg)
    log = os.path.join(workdir, "systemd.log")
    proc = _launch(units_dir, home_dir, cgroups, binds, log)
    box = SystemdBox(workdir, units_dir, proc.pid, 0, cgroups, log)
    try:
        _wait_pid1(box, proc)
        if user_manager:
            # -M root@ runs systemd-stdio-bridge --user as a transient service of PID 1, which
            # finds root's bus from XDG_RUNTIME_DIR: without logind (masked) nothing else sets it
            box.systemctl("set-environment", "XDG_RUNTIME_DIR=/run/user/0", check=True)
            box.systemctl("start", "dbus.socket", "user@0.service", check=True)
            _wait_user_manager(box)
    except BaseException:
        if box.pid1:
            box.close()
        else:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(5)
            box.close()
        raise
    return box
