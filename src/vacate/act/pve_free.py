"""A Proxmox container's volume freed through ``pct`` (``free-guest-volume``): once the
deletion of its mount point took effect the volume is ``unusedN`` of the container's config,
and ``pct set CTID --delete unusedN`` frees it (zfspool storage: ``zfs destroy -r``), as
pve-container does it (tests/fixtures/proxmox/pve-free-rules.txt).

Ready, read just before acting: the volume is ``unusedN`` of the current config; its mount
point's deletion still pending (the container runs) fails the step with the restart the
operator makes (vacate never restarts it; a rerun resumes); nothing else of the config (a
snapshot section, the pending changes) names the volume, since pct would then drop the key
and keep the volume; every archive the plan verifies is verified in this apply (its journal).

Done: no key of the config names the volume and its dataset is gone (``zfs list``). A config
without the key and a dataset still there is not done and not ready: pct dropped the key and
did not free it (not this container's, or referenced): failed, named.
"""

from __future__ import annotations

from vacate.act.base import CommandFailed, Context, Outcome
from vacate.act.kind import Kind, params
from vacate.observing.fsio import read_bounded
from vacate.observing.model.plan import Step
from vacate.observing.parsers import pve_config

KINDS = (Kind("free-guest-volume", after_earlier=True),)
MAX_BYTES = 1 << 20
PENDING = ("pve:pending", "PENDING")


class _Config:
    """What the container's config says of the volume now."""

    def __init__(self, text: str, where: str, volume: str, key: str):
        cfg, _problems = pve_config.parse(text, where)
        vol = pve_config.parse_volume
        self.current = {ln.key: ln.value for ln in cfg.current.lines}
        self.naming = [k for k, v in self.current.items()
                       if pve_config.is_disk_key(k) and vol(v).volume == volume]
        self.unused = next((k for k in self.naming if k.startswith("unused")), None)
        self.deleting: set[str] = set()
        self.pending_naming: list[str] = []
        self.snapshots: list[str] = []
        for sec in cfg.sections[1:]:
            if sec.name in PENDING:
                for ln in sec.lines:
                    if ln.key == "delete":
                        self.deleting.update(k.strip().lstrip("!") for k in ln.value.split(",")
                                             if k.strip())
                    elif pve_config.is_disk_key(ln.key) and vol(ln.value).volume == volume:
                        self.pending_naming.append(ln.key)
            elif any(pve_config.is_disk_key(ln.key) and vol(ln.value).volume == volume
                     for ln in sec.lines):
                self.snapshots.append(sec.name)
        self.mount_point = key if key in self.current and key in self.naming else None


def _config(step: Step, ctx: Context) -> _Config:
    p = params(step)
    try:
        data, more = read_bounded(ctx.host.path(p.config), MAX_BYTES, follow=False)
    except OSError as e:
        raise CommandFailed(("read", p.config), 1, f"{p.config}: {e.strerror or e}") from e
    if more:
        raise CommandFailed(("read", p.config), 1, f"{p.config} is larger than {MAX_BYTES} "
                                                   "bytes")
    return _Config(data.decode("utf-8", "surrogateescape"), p.config, p.volume, p.key)


def _dataset_exists(step: Step, ctx: Context) -> bool:
    """Whether ``zfs list`` finds the dataset; what it cannot tell is an error (unknown is
    never gone)."""
    p = params(step)
    r = ctx.run(["zfs", "list", "-H", "-o", "name", p.dataset], check=False, timeout=60)
    if r.returncode == 0:
        return True
    if "does not exist" in (r.stderr + r.stdout):
        return False
    raise CommandFailed(("zfs", "list", "-H", "-o", "name", p.dataset), r.returncode,
                        r.stderr or r.stdout)


def done(step: Step, ctx: Context) -> bool:
    """No key of the config names the volume, and its dataset is gone."""
    cfg = _config(step, ctx)
    return not cfg.naming and not _dataset_exists(step, ctx)


def ready(step: Step, ctx: Context) -> str | None:
    p = params(step)
    cfg = _config(step, ctx)
    ct = f"CT {p.vmid}"
    if cfg.mount_point is not None:
        if p.key in cfg.deleting:
            return (f"{ct} must restart for the pending removal of {p.key} to take effect "
                    f"(pct reboot {p.vmid}); then rerun vacate apply")
        return f"{p.key} of {ct} still mounts {p.volume}: its removal has not been asked"
    if cfg.unused is None:
        if cfg.naming:
            return f"{p.volume} is {', '.join(cfg.naming)} of {ct}, not an unused volume"
        return (f"{p.volume} is in no key of {ct}'s config and its dataset {p.dataset} is "
                "still there: pct did not free it (not this container's, or named "
                "elsewhere): left as it is")
    if cfg.snapshots:
        return (f"{p.volume} is named by snapshot {', '.join(cfg.snapshots)} of {ct}: pct "
                "would drop the key and keep the volume")
    if cfg.pending_naming:
        return (f"{p.volume} is named by the pending changes of {ct} "
                f"({', '.join(cfg.pending_naming)}): pct would keep the volume")
    from vacate.act.freeing import archives_verified

    st = ctx.earlier.get(step.id)
    return archives_verified(ctx, tuple(getattr(step.precondition, "verified_by", ()) or ()),
                             resumed=st is not None and st.event == "intent")


def skipped(step: Step, ctx: Context) -> Outcome:
    p = params(step)
    return Outcome("skipped", f"{p.volume} of CT {p.vmid} is freed already ({p.dataset} "
                              "is gone)", {"volume": p.volume, "dataset": p.dataset})


def run(step: Step, ctx: Context) -> Outcome:
    """``pct set CTID --delete unusedN``; ok once the key is gone and the dataset with it."""
    p = params(step)
    key = _config(step, ctx).unused
    argv = [p.tool or "pct", "set", p.vmid, "--delete", str(key)]
    try:
        r = ctx.run(argv)
    except CommandFailed as e:
        return Outcome("failed", str(e), {"argv": argv, "exit": e.code})
    said = (r.stderr or "").strip()
    if _config(step, ctx).naming:
        return Outcome("failed", f"{' '.join(argv)} ran and {key} is still in {p.config}",
                       {"argv": argv})
    if _dataset_exists(step, ctx):
        return Outcome("failed", f"{' '.join(argv)} dropped {key} from {p.config} and "
                                 f"{p.dataset} is still there" +
                                 (f" (pct said: {said[:300]})" if said else ""),
                       {"argv": argv})
    return Outcome("ok", f"{key} of CT {p.vmid} deleted: {p.volume} freed ({p.dataset} "
                         "destroyed)", {"argv": argv, "key": key, "volume": p.volume,
                                        "dataset": p.dataset})
