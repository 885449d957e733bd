"""People's and machines' views of archive / verify / restore results, and the progress bar
(bytes/s and ETA on stderr)."""

from __future__ import annotations

import contextlib
import os

from vacate.observing.human import human_bytes


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


def _secs(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else \
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


@contextlib.contextmanager
def progress_lines(env, label: str, every_s: float, clock=None):
    """Yields a ``progress(done, total)`` callback that writes a line on stderr at most every
    ``every_s`` seconds (for logs: no terminal, or no bar asked for); None when ``every_s``
    is 0."""
    if not every_s:
        yield None
        return
    import time
    clock = clock or time.monotonic
    t0 = clock()
    last = [t0]

    def update(done: int, total: int) -> None:
        now = clock()
        if now - last[0] < every_s:
            return
        last[0] = now
        rate = done / (now - t0) if now > t0 else 0
        left = f", about {_secs((total - done) / rate)} left" if rate and total > done else ""
        pct = f" ({100 * done // total} %)" if total else ""
        env.stderr.write(f"{label}: {human_bytes(done)} of {human_bytes(total)}{pct}, "
                         f"{human_bytes(int(rate))}/s{left}\n")
        env.stderr.flush()

    yield update


def _fd(f) -> dict:
    return f.as_json()


def archive_doc(r) -> dict:
    return {
        "schema": "vacate.archive/1", "location": r.location, "name": r.name,
        "parts": [p.as_json() for p in r.parts], "entries": r.entries, "files": r.files,
        "bytes_read": r.bytes_read, "bytes_written": r.bytes_written,
        "resumed_parts": r.resumed_parts, "reused_upload_bytes": r.reused_upload_bytes,
        "changed_while_read": list(r.changed), "missing": list(r.missing),
        "excluded": list(r.excluded), "destination_inside": list(r.destination_inside),
        "bytes_hashed": r.bytes_hashed, "up_to_date": r.up_to_date,
        "changed_since": list(r.changed_since),
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
        "findings": [_fd(f) for f in r.findings], "withheld": [_fd(f) for f in r.withheld],
        "elapsed_s": round(r.elapsed_s, 3),
    }


def _rate(n: int, s: float) -> str:
    return f"{human_bytes(int(n / s))}/s" if s > 0 else "-"


def _escape(text: str) -> str:
    """Text that holds names (an archive's paths) printed as it is, never read as markup."""
    from rich.markup import escape
    return escape(text)


def _list(console, style: str, label: str, items, limit: int = 30) -> None:
    items = list(items)
    for f in items[:limit]:
        console.print(f"[{style}]{label}[/] {f.code}: {_escape(f.message)}", markup=True,
                      highlight=False)
    if len(items) > limit:
        console.print(f"[{style}]... and {len(items) - limit} more (see --json)[/]")


def render_archive(r, console) -> None:
    if r.up_to_date or r.changed_since:
        _render_again(r, console)
        return
    hashed = max(r.bytes_hashed, r.bytes_read)
    holes = (f" ({human_bytes(hashed)} hashed, holes included)" if hashed > r.bytes_read
             else "")
    console.print(f"[bold]{r.location}[/]: {len(r.parts)} part(s), {r.entries:,} entries "
                  f"({r.files:,} files), {human_bytes(r.bytes_read)} read{holes} -> "
                  f"{human_bytes(r.bytes_written)} written in {r.elapsed_s:.1f} s "
                  f"({_rate(hashed, r.elapsed_s)}{' hashed' if holes else ''})")
    if r.resumed_parts:
        console.print(f"resumed: {r.resumed_parts} part(s) were already complete")
    # what was left out on purpose is said below, once
    for w in [w for w in r.warnings if w.code != "excluded"][:30]:
        console.print(f"[yellow]warning:[/] {w.message}")
    if r.changed:
        console.print(f"[red]{len(r.changed)} file(s) changed while being read[/]; their "
                      "archived copy may be inconsistent")
    if r.missing:
        console.print(f"[red]incomplete: {len(r.missing)} path(s) of the sources are not in "
                      "the archive[/]:", highlight=False)
        for p in r.missing[:30]:
            console.print(f"  [red]missing[/] {p}", highlight=False)
        if len(r.missing) > 30:
            console.print(f"  ... and {len(r.missing) - 30} more (see --json)")
    for d in r.destination_inside:
        console.print(f"the destination lies inside the source: {d} (this archive) is left "
                      "out of it", highlight=False)
    if r.excluded:
        console.print(f"excluded as asked: {', '.join(r.excluded[:10])}"
                      + (" ..." if len(r.excluded) > 10 else ""), highlight=False)


def _render_again(r, console) -> None:
    """``archive`` onto a complete archive: up to date, or what changed since."""
    if r.up_to_date:
        console.print(f"[bold]{r.location}[/]: [green]up to date[/]: {len(r.parts)} part(s), "
                      f"{r.entries:,} entries; the sources have not changed since it was "
                      "made (nothing written)")
    else:
        console.print(f"[bold]{r.location}[/]: [red]the sources changed since this archive "
                      f"was made[/] ({len(r.changed_since)} change(s)); nothing written:")
        for c in r.changed_since[:30]:
            console.print(f"  [red]changed[/] {c}", highlight=False)
        if len(r.changed_since) > 30:
            console.print(f"  ... and {len(r.changed_since) - 30} more (see --json)")
        console.print("archive them under another --name, or remove this archive first")
    for w in r.warnings[:30]:
        console.print(f"[yellow]warning:[/] {w.message}")


def render_verify(r, console) -> None:
    state = "[green]OK[/]" if r.ok else f"[red]{len(r.findings)} problem(s)[/]"
    console.print(f"[bold]{_escape(r.location)}[/]: {state}: {r.parts_checked} part(s), "
                  f"{r.files_checked:,} files, {human_bytes(r.bytes_checked)} checked in "
                  f"{r.elapsed_s:.1f} s ({_rate(r.bytes_checked, r.elapsed_s)})"
                  + (f"; {r.sources_checked:,} source entries compared" if r.sources_checked
                     else ""))
    _list(console, "red", "mismatch", r.findings)
    for w in r.warnings[:30]:
        console.print(f"[yellow]warning:[/] {_escape(w.message)}", highlight=False)


def render_restore(r, console) -> None:
    state = "[green]OK[/]" if r.ok else "[red]incomplete[/]"
    console.print(f"{state}: restored {r.restored:,} entries ({human_bytes(r.bytes_written)}) "
                  f"into {_escape(r.dest)} from {len(r.parts_read)} part(s) "
                  f"({', '.join(os.path.basename(p) for p in r.parts_read[:6])}"
                  f"{'...' if len(r.parts_read) > 6 else ''})")
    _list(console, "yellow", "refused", r.refused)
    _list(console, "red", "error", r.findings)
    _list(console, "yellow", "not restored", r.withheld)
