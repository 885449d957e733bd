"""People's and machines' views of a native (``zfs send``) archive's results: archive,
verify (its strength said: ``received`` proves it receivable, ``parsed`` is the weaker
check) and restore."""

from __future__ import annotations

from vacate.observing.human import human_bytes
from vacate.output.archive_view import _escape, _fd, _list, _rate

_STRENGTH = {"received": "received into a scratch dataset and compared with the source",
             "parsed": "the weaker check: parsed to its END, not received (it does not "
                       "allow freeing the dataset)"}
# what the received tree was compared with
_AGAINST = {"recorded": "the source's tree as recorded when it was archived",
            "source": "the source snapshot's tree, read now", "": "nothing (digested only)"}
# what the received data (its stream digested) was compared with
_DATA_AGAINST = {"source": "the source snapshot's stream",
                 "archived": "the archive's stream (the source is gone)",
                 "": "nothing (digested only)"}


def archive_doc(r) -> dict:
    return {"schema": "vacate.zfs-archive-result/1", "location": r.location,
            "manifest": r.manifest.as_json(), "snapshot_taken": r.snapshot_taken,
            "up_to_date": r.up_to_date, "notes": list(r.notes),
            "elapsed_s": round(r.elapsed_s, 3)}


def verify_doc(r) -> dict:
    c = r.compared
    return {"schema": "vacate.zfs-verify/1", "location": r.location, "origin": r.origin,
            "ok": r.ok, "strength": r.strength, "allows_freeing": r.allows_freeing,
            "parts_checked": r.parts_checked, "bytes_checked": r.bytes_checked,
            "stream_bytes": r.stream_bytes,
            "compared": None if c is None else {
                "entries": c.entries, "bytes": c.bytes, "digest": c.digest,
                "against": r.against or None},
            "content": None if r.content is None else {
                "digest": r.content.digest, "objects": r.content.objects,
                "bytes": r.content.bytes, "against": r.content.against or None},
            "findings": [_fd(f) for f in r.findings], "notes": list(r.notes),
            "elapsed_s": round(r.elapsed_s, 3)}


def restore_doc(r) -> dict:
    return {"schema": "vacate.zfs-restore/1", "location": r.location, "origin": r.origin,
            "into": r.into, "snapshot": r.snapshot, "ok": r.ok, "bytes_read": r.bytes_read,
            "findings": [_fd(f) for f in r.findings], "elapsed_s": round(r.elapsed_s, 3)}


def render_archive(r, console) -> None:
    m = r.manifest
    if r.up_to_date:
        console.print(f"[green]up to date[/]: {_escape(r.location)} already holds "
                      f"{_escape(m.origin)} (guid {m.guid})", highlight=False)
        return
    flags = " ".join(m.send_flags) or "no flags"
    console.print(f"[green]OK[/]: {_escape(m.origin)} sent ({flags}): {human_bytes(m.stream_bytes)} stream, "
                  f"{human_bytes(m.archive_bytes)} in {len(m.parts)} part(s) in "
                  f"{_escape(r.location)} in {r.elapsed_s:.1f} s "
                  f"({_rate(m.stream_bytes, r.elapsed_s)})", highlight=False)
    console.print(f"restore: {_escape(m.receive_command())}", highlight=False)
    for n in r.notes:
        console.print(f"[yellow]note:[/] {_escape(n)}", highlight=False)


def render_verify(r, console) -> None:
    state = "[green]OK[/]" if r.ok else f"[red]{len(r.findings)} problem(s)[/]"
    console.print(f"[bold]{_escape(r.location)}[/] ({_escape(r.origin)}): {state}: "
                  f"{r.parts_checked} part(s), {human_bytes(r.bytes_checked)} read, "
                  f"{human_bytes(r.stream_bytes)} stream in {r.elapsed_s:.1f} s",
                  highlight=False)
    console.print(f"strength: {r.strength}: {_STRENGTH[r.strength]}", highlight=False)
    if r.compared is not None:
        console.print(f"received tree: {r.compared.entries:,} entries, "
                      f"{human_bytes(r.compared.bytes)}, digest {r.compared.digest}, "
                      f"compared with {_AGAINST[r.against]}", highlight=False)
    if r.content is not None:
        console.print(f"received data: {r.content.objects:,} objects, "
                      f"{human_bytes(r.content.bytes)}, digest {r.content.digest}, "
                      f"compared with {_DATA_AGAINST[r.content.against]}", highlight=False)
    _list(console, "red", "mismatch", r.findings)
    for n in r.notes:
        console.print(f"[yellow]note:[/] {_escape(n)}", highlight=False)


def render_restore(r, console) -> None:
    if r.ok:
        console.print(f"[green]OK[/]: {_escape(r.origin)} received as {_escape(r.snapshot)} "
                      f"({human_bytes(r.bytes_read)} read) in {r.elapsed_s:.1f} s",
                      highlight=False)
    else:
        console.print(f"[red]not restored[/]: {_escape(r.into)}", highlight=False)
    _list(console, "red", "error", r.findings)
