"""The Hugging Face hub cache: ``models--org--name/{blobs,snapshots/<rev>,refs}`` as
huggingface_hub lays it out, and the ``hub`` directory that holds such repos."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise import hf_model
from vacate.observing.recognise.base import Ctx, claims, cls, composite, dirs, list_dir
from vacate.observing.recognise.read import open_noatime

REPO_DIR = re.compile(r"^(models|datasets|spaces)--(.+)$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


def repo_id(name: str) -> tuple[str, str] | None:
    m = REPO_DIR.match(name)
    if not m:
        return None
    return m.group(1)[:-1], m.group(2).replace("--", "/")


HEAD_AHEAD = 64 * 1024    # what the recognisers read of a shard (its header) at most at once
LINK_READERS = 8          # threads reading links side by side


def read_ahead(paths: Iterable[str]) -> int:
    """Have what looking at the hub repos among ``paths`` will read that a walk did not
    read into the page cache, quickly: each ref and the head of each blob, asked for all at
    once (``posix_fadvise WILLNEED``, in inode order), and the snapshots' links to the
    config, shard indexes and weights, read by a few threads side by side (a
    ``../../blobs/<sha256>`` target is too long to be kept in the inode). Cold, each is a
    read of its own on the disk, and looking at them one after another waits for each;
    queued together the disk serves them much faster (right after a cold walk, 5,984 blob
    heads: 1.24 s read one after another, 0.8 s in inode order, 0.21 s asked for
    together and then read). Only the page cache changes; nothing is reported, errors are
    ignored; no thread is left running. Returns how many files were asked for."""
    links: list[tuple[int, str]] = []
    heads: list[tuple[int, str]] = []
    for repo in paths:
        if not REPO_DIR.match(os.path.basename(repo)):
            continue
        for sub in ("refs", "blobs"):
            try:
                with os.scandir(os.path.join(repo, sub)) as it:
                    heads.extend((e.inode(), e.path) for e in it
                                 if e.is_file(follow_symlinks=False))
            except OSError:
                pass
        try:
            with os.scandir(os.path.join(repo, "snapshots")) as revs:
                for rev in revs:
                    if rev.is_dir(follow_symlinks=False):
                        with os.scandir(rev.path) as it:
                            links.extend((e.inode(), e.path) for e in it
                                         if e.is_symlink() and _READ.search(e.name))
        except OSError:
            pass
    heads.sort()
    for _, path in heads:
        try:
            fd = open_noatime(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, HEAD_AHEAD, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)
    links.sort()
    if links:
        import threading

        def read(part: list[tuple[int, str]]) -> None:
            for _, path in part:
                try:
                    os.readlink(path)
                except OSError:
                    pass

        threads = [threading.Thread(target=read, args=(links[k::LINK_READERS],))
                   for k in range(LINK_READERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return len(heads) + len(links)


_READ = re.compile(r"(^config\.json|\.safetensors|\.index\.json)$")


@claims(REPO_DIR.match)
@dirs
def hub_repo(ctx: Ctx) -> Classification | None:
    rid = repo_id(ctx.name)
    if rid is None:
        return None
    lst = ctx.listing()
    if not lst.has("snapshots") and not lst.has("blobs"):
        return None
    rtype, rid_s = rid
    refs: dict[str, str] = {}
    if "refs" in lst.dirs:
        for ref in sorted(list_dir(ctx.join("refs"), ctx.reader).files)[:50]:
            h = (ctx.reader.head(ctx.join("refs", ref), 64, quiet=True) or b"").decode(
                "ascii", "replace").strip()
            if COMMIT.match(h):
                refs[ref] = h
    snaps = list(list_dir(ctx.join("snapshots"), ctx.reader).dirs) if "snapshots" in lst.dirs \
        else []
    blobs = list_dir(ctx.join("blobs"), ctx.reader) if "blobs" in lst.dirs else None
    incomplete = [n for n in (blobs.files if blobs else {}) if n.endswith(".incomplete")]
    rev = refs.get("main") or (snaps[-1] if len(snaps) == 1 else None)
    if rev is None and snaps:
        rev = snaps[0]
    source = f"hf:{rid_s}" + (f"@{rev}" if rev else "")
    if rtype != "model" or not rev or rev not in snaps:
        what = {"dataset": "dataset", "space": "Space"}.get(rtype, "model")
        return cls("dataset" if rtype == "dataset" else "cache",
                   f"Hugging Face hub cache: {what} {rid_s}, {len(snaps)} revisions, "
                   f"{human_bytes(ctx.stats.apparent_bytes)}", recoverable="re-downloadable",
                   source=source, confidence=0.9, evidence=("hub cache layout",),
                   repo_id=rid_s, repo_type=rtype, revisions=snaps[:20], refs=refs)
    snap = ctx.join("snapshots", rev)
    c = hf_model.describe(ctx.reader, snap, list_dir(snap, ctx.reader), ctx.stats.apparent_bytes,
                          within=ctx.path, name=rid_s, hub=(rid_s, rev))
    if c is None:
        c = cls("cache", f"Hugging Face hub cache: {rid_s}", confidence=0.8)
    extra = f"{len(snaps)} revisions" if len(snaps) > 1 else "1 revision"
    ref_names = ", ".join(sorted(refs)) or "no refs"
    label = f"Hugging Face hub cache: {c.label} ({extra}; refs: {ref_names}" + (
        f"; {len(incomplete)} downloads unfinished)" if incomplete else ")")
    details = dict(c.details, repo_id=rid_s, revisions=snaps[:20], refs=refs,
                   blobs=len(blobs.files) if blobs else 0, unfinished_downloads=len(incomplete))
    return cls(c.kind, label, recoverable="re-downloadable", source=source,
               confidence=max(c.confidence, 0.85), evidence=c.evidence, **details)


HUB_FILES = (".locks", "version.txt", "version_diffuser.txt")   # the cache's own bookkeeping


@composite
def hub_root(ctx: Ctx) -> Classification | None:
    """The ``hub`` directory: how many repos of each type it holds, counted in its listing
    (all of them, not only those looked into), and whether it holds anything else."""
    if not any(repo_id(os.path.basename(k.path)) for k in ctx.children or ()):
        return None
    lst = ctx.listing()
    n = {"model": 0, "dataset": 0, "space": 0}
    others = []
    for d in lst.dirs:
        rid = repo_id(d)
        if rid is not None:
            n[rid[0]] += 1
        elif d not in HUB_FILES:
            st = ctx.stats_of(ctx.join(d))
            if st is None or st.apparent_bytes > 4096:
                others.append(d)
    others += [f.name for f in lst.files.values() if f.name not in HUB_FILES and f.size > 4096]
    more = "+" if lst.truncated else ""      # (the listing stopped: at least this many)
    what = ", ".join(f"{v:,}{more} {t}{'s' if v > 1 else ''}" for t, v in n.items() if v)
    return cls("cache", f"Hugging Face hub cache: {what}, {human_bytes(ctx.stats.apparent_bytes)}",
               recoverable="re-downloadable" if not others and not more else None,
               confidence=0.9 if not others else 0.6, evidence=("models--*/ directories",),
               repos=sum(n.values()), other_entries=others[:20] or None)
