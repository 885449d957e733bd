"""The first look over a made-up /proc tree (``live=False``, as for a captured tree): every rule
of :func:`procs_probe.probe` on one process each, including the awkward ones (a kernel thread,
a process gone mid-read, a file that cannot be read), and the C look giving exactly what the
Python look gives."""

import os

import pytest

from vacate.observing.collectors import procs_probe

VOL = "/vol"
TOKEN = b" 07:03 "
PLAIN_MAPS = ("55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1311 /usr/bin/sleep\n"
              "7f1c2e000000-7f1c2e022000 r--p 00000000 fd:01 2233 /usr/lib/libc.so.6\n")


def _stat(pid: int, comm: str, flags: int) -> str:
    return f"{pid} ({comm}) S 2 0 0 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n"


def _proc(pid: int, base, *, exe: str | None = "/usr/bin/sleep", cwd: str = "/",
          fds: dict | None = None, maps: str | None = PLAIN_MAPS, flags: int = 0x400100,
          fd_dir: bool = True, comm: str = "sleep"):
    d = base / str(pid)
    d.mkdir()
    if exe is not None:
        os.symlink(exe, d / "exe")
    os.symlink(cwd, d / "cwd")
    os.symlink("/", d / "root")
    if fd_dir:
        (d / "fd").mkdir()
        for n, target in (fds or {0: "/dev/null", 1: "pipe:[4242]"}).items():
            os.symlink(target, d / "fd" / str(n))
    if maps is None:
        (d / "maps").mkdir()              # cannot be read as a file: EISDIR
    else:
        (d / "maps").write_text(maps)
    (d / "stat").write_text(_stat(pid, comm, flags))


@pytest.fixture
def tree(tmp_path):
    _proc(100, tmp_path, fds={0: "/dev/null", 1: f"{VOL}/data/log.txt"})   # fd on the volume
    _proc(101, tmp_path, exe="/usr/bin/y (deleted)")                        # deleted exe
    _proc(102, tmp_path, exe=None, flags=0x208040, comm="kworker/0:1",      # kernel thread
          fd_dir=False, maps="")
    _proc(103, tmp_path, exe=None, fd_dir=False)                # exited while being read
    _proc(104, tmp_path, maps=PLAIN_MAPS + "7f1c2f000000-7f1c2f100000 r--s 00000000"
          f"{TOKEN.decode()}77 {VOL}/models/w.bin\n")                        # mapping only
    _proc(105, tmp_path, maps=None)                             # maps unreadable
    _proc(106, tmp_path, cwd=f"{VOL}/work")                     # cwd on the volume
    _proc(107, tmp_path)                                        # nothing on the volume
    _proc(108, tmp_path, fds={3: "socket:[123]", 4: "anon_inode:[eventfd]",
                              5: "/tmp/x (deleted)"})           # a deleted file elsewhere
    _proc(109, tmp_path, fds={0: f"{VOL}x/other"})              # a neighbour's prefix
    return str(tmp_path), [100, 101, 102, 103, 104, 105, 106, 107, 108, 109]


def test_rules_on_a_made_up_tree(tree):
    proc, pids = tree
    got = procs_probe.probe(proc, pids, (VOL,), (TOKEN,), None, False)
    # 105 could not be read (the full read says why); 108 holds a deleted file (no path to
    # match); 109's "/volx" shares the prefix: candidates are read in full, which decides
    assert got.candidates == [100, 101, 104, 105, 106, 108, 109]
    # read: all but 103 (gone mid-read) and 105 (failed)
    assert got.count == 8
    assert got.namespaces == {}


def test_c_look_gives_the_python_look(tree):
    if procs_probe._fastproc is None:
        pytest.skip("the C look was not built")
    proc, pids = tree
    py = procs_probe.probe(proc, pids, (VOL,), (TOKEN,), None, False)
    for threads in (0, 1, 2, 4, 16):
        c = procs_probe._c_result(procs_probe._c_start(proc, pids, (VOL,), (TOKEN,), None,
                                                       False, threads))
        assert (c.candidates, c.count, c.namespaces) == (py.candidates, py.count,
                                                          py.namespaces), threads
    # pids that are not there at all: vanished, not candidates
    c = procs_probe._c_result(procs_probe._c_start(proc, [1, 2, 99999], (VOL,), (TOKEN,), None,
                                                   False, 2))
    assert (c.candidates, c.count) == ([], 0)


def test_c_look_refuses_bad_arguments():
    if procs_probe._fastproc is None:
        pytest.skip("the C look was not built")
    with pytest.raises(TypeError):
        procs_probe._fastproc.probe(b"/proc", ["1"], (), (), None, False, 1)
    with pytest.raises(TypeError):
        procs_probe._fastproc.probe(b"/proc", [1], ("not bytes",), (), None, False, 1)
