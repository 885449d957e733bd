"""``/etc/fstab`` entries that use the volume: the line that mounts the volume itself (found by
device, ``UUID=``/``LABEL=``/``PARTUUID=``, image file or ZFS dataset), mount points on it,
bind mounts from it, loop and swap files on it, and paths on it inside mount options.
Standard library only.
"""

from __future__ import annotations

import hashlib

from vacate.observing.collectors.configured.blockdev import VolumeDevice
from vacate.observing.collectors.configured.cfgfiles import line_evidence, read_text, spelled
from vacate.observing.collectors.configured.match import VolumeView
from vacate.observing.collectors.configured.resolve import on_volume
from vacate.observing.collectors.mounts import is_under as _under
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.mount import Target
from vacate.observing.model.usage import Consumer, Evidence
from vacate.observing.parsers import fstab as fstab_parser
from vacate.observing.parsers.fstab import FstabEntry
from vacate.observing.parsers.redact import redact_text, shown_text


def entry_uses(entry: FstabEntry, host: Host, view: VolumeView, dev: VolumeDevice | None,
               volume_path: str, target_rel: str | None = None
               ) -> list[tuple[str, str | None, str]]:
    """How one fstab-format entry uses the volume: ``(relation, host path, note)`` items.

    ``volume_path``: the target's host path; ``target_rel``: for LXC entries, the path that a
    relative mount point lies under (the container's rootfs, as the view spells it)."""
    uses: list[tuple[str, str | None, str]] = []
    src_host = on_volume(host, view, entry.source)
    how = dev.matches(host, entry.source, entry.fstype) if dev is not None else None
    subvol = entry.option("subvol") if how and dev is not None else None
    if subvol is not None and dev is not None:
        # one btrfs filesystem, several subvolumes: which one does the entry mount?
        sub = "/" + subvol.strip("/")
        if _under(dev.fs_root, sub):
            uses.append(("mounts-volume", volume_path, f"mounts the volume: {how}, {sub}"))
        elif _under(sub, dev.fs_root):
            inner = volume_path.rstrip("/") + sub[len(dev.fs_root.rstrip("/")):]
            uses.append(("mounts-subvolume", inner, f"mounts subvolume {sub} of the volume"))
        else:
            note = f"mounts subvolume {sub} of the volume's filesystem ({how}); " \
                f"the volume is {dev.fs_root}"
            uses.append(("same-filesystem", None, note))
    elif how:
        uses.append(("mounts-volume", volume_path, f"mounts the volume: {how}"))
    elif src_host is not None:
        if entry.is_bind:
            uses.append(("bind-source", src_host, "bind mount of a path on the volume"))
        elif entry.is_swap:
            uses.append(("swap-file", src_host, "swap file on the volume"))
        else:
            uses.append(("backing-file", src_host, "mounts a file on the volume (loop)"))
    mp = entry.target
    if target_rel is not None and not mp.startswith("/"):
        mp = target_rel.rstrip("/") + "/" + mp
    mp_host = on_volume(host, view, mp)
    if mp_host is not None and not how:
        if mp_host == volume_path and entry.target.startswith("/"):
            # the volume's own mount point, with a source not recognised as the volume: its
            # own entry with a stale tag, or something else that would be mounted over it
            note = "mounts something at the volume's mount point (source not recognised)"
            uses.append(("same-mountpoint", mp_host, note))
        else:
            uses.append(("mountpoint-on-volume", mp_host, "mount point lies on the volume"))
    for tok, host_path in view.paths_in_text(",".join(entry.options)):
        uses.append(("option-path", host_path, f"mount option names {tok}"))
    return uses


def collect(host: Host, target: Target, view: VolumeView
            ) -> tuple[tuple[Consumer, ...], tuple[Problem, ...]]:
    local = host.etc_path("fstab")
    text, problem = read_text(host, local)
    if text is None:
        return (), (problem,) if problem else ()
    where = spelled(host, local)
    entries, parsed = fstab_parser.parse(text, where)
    problems = (problem, *parsed) if problem else tuple(parsed)
    dev = VolumeDevice.of(target)
    consumers: list[Consumer] = []
    for e in entries:
        uses = entry_uses(e, host, view, dev, target.path)
        if not uses:
            continue
        paths = tuple(dict.fromkeys(p for _r, p, _n in uses if p))
        ev: tuple[Evidence, ...] = tuple(
            line_evidence("config-line", p, where, e.line, e.raw, note) for _r, p, note in uses)
        consumers.append(Consumer(
            id=f"fstab:{where}:{e.line}", type="fstab",
            name=shown_text(f"{e.source} on {e.target}"), live=False, paths=paths, evidence=ev,
            attrs={"file": where, "line": e.line, "source": redact_text(e.source),
                   "mountpoint": e.target, "fstype": e.fstype,
                   "options": [redact_text(o) for o in e.options],
                   "relations": list(dict.fromkeys(r for r, _p, _n in uses)),
                   "noauto": e.has_option("noauto"), "nofail": e.has_option("nofail"),
                   "line_sha256": hashlib.sha256(
                       e.raw.encode("utf-8", "surrogateescape")).hexdigest()}))
    return tuple(consumers), problems
