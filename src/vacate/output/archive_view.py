"""People's and machines' views of archive / verify / restore results, and the progress bar
(bytes/s and ETA on stderr)."""

from __future__ import annotations

import contextlib
import os

from vacate.output.units import human_bytes


@contextlib.contextmanager
def progress_bar(env, label: str, enabled: bool = True):
    """Yields a ``progress(done, total)`` callback drawing a rich bar on stderr (tty only)."""
    if not enabled or not env.stderr_isatty:
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    with Progress(TextColumn(label), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), console=env.console(stderr=True),
                  transient=True) as p:
        task = p.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            p.update(task, completed=done, total=total or None)

        yield update


def _fd(f) -> dict:
    return f.as_json()


def archive_doc(r) -> dict:
    return {
        "schema": "vacate.archive/1", "location": r.location, "name": r.name,
        "parts": [p.as_json() for p in r.parts], "entries": r.entries, "files": r.files,
        "bytes_read": r.bytes_read, "bytes_written": r.bytes_written,
        "resumed_parts": r.resumed_parts, "reused_upload_bytes": r.reused_upload_bytes,
        "changed_while_read": list(r.changed),
        "warnings": [w.as_json() for w in r.warnings], "elapsed_s": round(r.elapsed_s, 3),
    }


def verify_doc(r) -> dict:
    return {
        "schema": "vacate.verify/1", "location": r.location, "name": r.name, "ok": r.ok,
        "parts_checked": r.parts_checked, "files_checked": r.files_checked,
        "bytes_checked": r.bytes_checked, "sources_checked": r.sources_checked,
        "findings": [_fd(f) for f in r.findings],
        "warnings": [w.as_json() for w in r.warnings], "elapsed_s": round(r.elapsed_s, 3),
    }


def restore_doc(r) -> dict:
    return {
        "schema": "vacate.restore/1", "location": r.location, "dest": r.dest, "ok": r.ok,
        "restored": r.restored, "bytes_written": r.bytes_written,
        "parts_read": list(r.parts_read), "refused": [_fd(f) for f in r.refused],
        "findings": [_fd(f) for f in r.findings], "elapsed_s": round(r.elapsed_s, 3),
    }


def _rate(n: int, s: float) -> str:
    return f"{human_bytes(int(n / s))}/s" if s > 0 else "-"


def _list(console, style: str, label: str, items, limit: int = 30) -> None:
    items = list(items)
    for f in items[:limit]:
        console.print(f"[{style}]{label}[/] {f.code}: {f.message}", markup=True,
                      highlight=False)
    if len(items) > limit:
        console.print(f"[{style}]... and {len(items) - limit} more (see --json)[/]")


def render_archive(r, console) -> None:
    console.print(f"[bold]{r.location}[/]: {len(r.parts)} part(s), {r.entries:,} entries "
                  f"({r.files:,} files), {human_bytes(r.bytes_read)} read -> "
                  f"{human_bytes(r.bytes_written)} written in {r.elapsed_s:.1f} s "
                  f"({_rate(r.bytes_read, r.elapsed_s)})")
    if r.resumed_parts:
        console.print(f"resumed: {r.resumed_parts} part(s) were already complete")
    for w in r.warnings[:30]:
        console.print(f"[yellow]warning:[/] {w.message}")
    if r.changed:
        console.print(f"[red]{len(r.changed)} file(s) changed while being read[/]; their "
                      "archived copy may be inconsistent")


def render_verify(r, console) -> None:
    state = "[green]OK[/]" if r.ok else f"[red]{len(r.findings)} problem(s)[/]"
    console.print(f"[bold]{r.location}[/]: {state}: {r.parts_checked} part(s), "
                  f"{r.files_checked:,} files, {human_bytes(r.bytes_checked)} checked in "
                  f"{r.elapsed_s:.1f} s ({_rate(r.bytes_checked, r.elapsed_s)})"
                  + (f"; {r.sources_checked:,} source entries compared" if r.sources_checked
                     else ""))
    _list(console, "red", "mismatch", r.findings)
    for w in r.warnings[:30]:
        console.print(f"[yellow]warning:[/] {w.message}")


def render_restore(r, console) -> None:
    state = "[green]OK[/]" if r.ok else "[red]incomplete[/]"
    console.print(f"{state}: restored {r.restored:,} entries ({human_bytes(r.bytes_written)}) "
                  f"into {r.dest} from {len(r.parts_read)} part(s) "
                  f"({', '.join(os.path.basename(p) for p in r.parts_read[:6])}"
                  f"{'...' if len(r.parts_read) > 6 else ''})")
    _list(console, "yellow", "refused", r.refused)
    _list(console, "red", "error", r.findings)
