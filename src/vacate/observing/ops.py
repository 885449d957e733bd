"""What the observing layer answers when asked from elsewhere: each operation a function of
JSON values returning a model value, the same whether it runs in this process
(:class:`vacate.remote.local.Local`) or on a far host through
:mod:`vacate.observing.worker`. Everything here reads; nothing changes the machine.
Standard library only.
"""

from __future__ import annotations

import os

from vacate.observing.collectors.machine import machine_id
from vacate.observing.host import Host


def hello(host: Host) -> dict:
    """Who answers: the interpreter, the machine and the user (a plan records the machine)."""
    import platform
    import sys

    return {"python": platform.python_version(), "executable": sys.executable,
            "machine_id": machine_id(host), "hostname": platform.node(),
            "uid": os.getuid(), "euid": os.geteuid(), "pid": os.getpid()}


def observe(host: Host, path: str, *, scan_tree: bool = True, users: bool = True,
            configured: bool = True, ct: str | None = None, recognise: bool = True,
            keep_largest: int = 50, records=None, progress=None):
    """:func:`vacate.observing.observe.observe` of ``path`` (inside container ``ct`` where
    given: :mod:`vacate.observing.ct`). ``records``: only in this process, a
    :class:`~vacate.observing.entries_fused.WalkRecords` the walk records items to delete
    into (not in a container: they are then recorded alone). ``progress(entries, bytes)``:
    only in this process, the walk's progress; it is always counted in
    :mod:`~vacate.observing.beat` (what a far worker's heartbeat says)."""
    from vacate.observing import beat
    from vacate.observing.observe import observe as look

    def counted(entries: int, nbytes: int) -> None:
        beat.counted(entries, nbytes)
        if progress is not None:
            progress(entries, nbytes)

    if ct is not None:
        from vacate.observing import ct as container

        return container.observe(host, ct, path, scan_tree=scan_tree, users=users,
                                 configured=configured, recognise_items=recognise,
                                 keep_largest=keep_largest, progress=counted)
    return look(path, host=host, scan_tree=scan_tree, users=users, configured=configured,
                recognise_items=recognise, keep_largest=keep_largest, progress=counted,
                **({} if records is None else {"records": records}))


def target(host: Host, path: str, *, nearest: bool = False, ct: str | None = None):
    """The :class:`~vacate.observing.model.mount.Target` holding ``path`` (``path`` as
    container ``ct`` spells it, where given); ``nearest``: of the nearest directory above it
    that exists (for a destination not made yet)."""
    from vacate.observing.collectors import mounts
    from vacate.observing.fsio import existing_parent

    if ct is not None:
        from vacate.observing.ct import view_of

        path = view_of(host, ct, path)[0].host_path
    return mounts.resolve_target(existing_parent(path) if nearest else path, host)


def free_bytes(host: Host, path: str) -> int:
    """The space an unprivileged writer has at ``path`` (or the directory above that exists)."""
    from vacate.observing.fsio import existing_parent

    st = os.statvfs(existing_parent(path))
    return st.f_bavail * st.f_frsize


def record_entries(host: Host, path: str, *, dev: int):
    """:func:`vacate.observing.entries.record_entries` of one item."""
    from vacate.observing.entries import record_entries as record

    return record(path, dev=dev)


def record_item(host: Host, path: str, *, dev: int):
    """:func:`vacate.observing.entries.record_item`: an item's totals and digest."""
    from vacate.observing.entries import record_item as record

    return record(path, dev=dev)


def write_entries(host: Host, path: str, *, dev: int, directory: str):
    """:func:`vacate.observing.entries.write_entries_file` into ``directory`` (here)."""
    from vacate.observing.entries import write_entries_file

    return write_entries_file(path, dev=dev, directory=directory)


PIECE = 4 << 20               # an entries file goes back in pieces this big at most
_kept: dict = {}              # entries files recorded here, kept until their last piece


def entries_file(host: Host, path: str, *, dev: int) -> dict:
    """Record an item's entries file, for a plan made elsewhere which keeps the file beside
    itself: what recording it came to, and the file's name and size; its bytes are then
    asked for in pieces (:func:`entries_piece`), so that no reply holds a whole file of
    millions of entries."""
    import io

    from vacate.observing.entries import file_name
    from vacate.observing.entries import record_item as record
    from vacate.observing.model import codec

    buf = io.BytesIO()
    rec = record(path, dev=dev, out=buf)
    name = file_name(rec.sha256)
    _kept.clear()                 # (one at a time: what was not fetched is dropped)
    _kept[name] = buf
    return {"recorded": codec.encode(rec), "name": name, "size": buf.getbuffer().nbytes}


def entries_piece(host: Host, name: str, offset: int, size: int = PIECE) -> str:
    """The bytes of a recorded entries file from ``offset``, ``size`` of them (at most
    :data:`PIECE`), base64; the file is dropped here once its last piece is asked for."""
    import base64

    buf = _kept.get(name)
    if buf is None:
        from vacate.observing.errors import VacateError

        raise VacateError(f"no entries file {name} is kept here (record it again)")
    view = buf.getbuffer()
    try:
        size = max(1, min(size, PIECE))
        piece = base64.b64encode(view[offset:offset + size]).decode("ascii")
        last = offset + size >= view.nbytes
    finally:
        view.release()
    if last:
        del _kept[name]
    return piece


def system_devices(host: Host) -> dict:
    """:func:`vacate.observing.system.system_devices`."""
    from vacate.observing.system import system_devices as devices

    return devices(host)


def file_stats(host: Host, path: str):
    """A file's own :class:`~vacate.observing.model.inventory.Stats` (None for a directory
    or what cannot be read)."""
    import stat

    from vacate.observing.model.inventory import Stats

    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return None
    return Stats(apparent_bytes=st.st_size, disk_bytes=st.st_blocks * 512, files=1, dirs=0,
                 newest_mtime=st.st_mtime, newest_atime=st.st_atime)


def ct_view(host: Host, ctid: str, path: str):
    """How container ``ctid`` spells ``path`` and where the host has it
    (:class:`~vacate.observing.model.observation.CtView`, its config's sha256 included)."""
    from vacate.observing.ct import view_of

    return view_of(host, ctid, path)[0]


def commands(host: Host, names: list) -> dict:
    """Where each command of ``names`` is on this host's PATH ("" where it is not)."""
    import shutil

    return {str(n): shutil.which(str(n)) or "" for n in names}


def zfs_dataset(host: Host, dataset: str):
    """:func:`vacate.observing.collectors.zfs.dataset_facts`: what freeing ``dataset``
    depends on (its snapshots with their holds and clones, its children)."""
    from vacate.observing.collectors.zfs import dataset_facts

    return dataset_facts(dataset)


OPS = {"hello": hello, "ct_view": ct_view, "commands": commands, "observe": observe, "target": target, "free_bytes": free_bytes,
       "record_entries": record_entries, "record_item": record_item,
       "entries_file": entries_file, "entries_piece": entries_piece,
       "system_devices": system_devices,
       "file_stats": file_stats, "zfs_dataset": zfs_dataset}
