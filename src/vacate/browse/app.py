"""``vacate browse``: the volume as ncdu shows it, with what each entry is and what uses it,
and the plan made by marking entries. Read-only: ``w`` writes a plan file through the
planner ``vacate plan`` uses; nothing is ever applied.

The listing is a virtual list (a Line API widget): it renders only the rows on screen, so a
directory of a hundred thousand entries costs what its visible rows cost."""

from __future__ import annotations

import os
import shlex
import time
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Static

from vacate.browse import rows, timing
from vacate.browse.model import STATUSES, Entry, Listing, View, Volume
from vacate.browse.screens import CSS as SCREENS_CSS
from vacate.browse.screens import ActionMenu, Ask, Page
from vacate.output.report_names import shown

HELP = (
    ("↑ ↓  k j", "move (PgUp PgDn Home End)"),
    ("Enter → l", "into the directory"),
    ("← Backspace h", "up to the parent"),
    ("s  n  M", "sort by size / name / modification time"),
    ("a", "sizes: apparent or on disk (the bars follow)"),
    ("f", "filter by status: " + " / ".join(STATUSES) + " / all"),
    ("t", "filter by kind (model, dataset, ...) / all"),
    ("Space", "mark: keep / archive / delete / unmark (k a d u, or arrows and Enter)"),
    ("d", "mark delete (asks first when nothing is known to get it back)"),
    ("w", "write the plan (-o) through the planner vacate plan uses"),
    ("?", "this help"),
    ("q", "quit (asks first when there are marks not written)"),
)


class EntryList(ScrollView, can_focus=True):
    """The current directory's entries, one line each, only the visible ones rendered."""

    BINDINGS: ClassVar[list] = [
        Binding("up,k", "move(-1)", "up", show=False),
        Binding("down,j", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "edge(0)", show=False),
        Binding("end", "edge(1)", show=False),
    ]
    cursor = reactive(0, always_update=True)

    def __init__(self, vol: Volume, *, moved=None, now: float | None = None, **kw):
        super().__init__(**kw)
        self.vol = vol
        # called when the cursor moved, at once: what it redraws is then in the same frame
        # as the list (a message would come a frame later)
        self.moved = moved
        self.view = View()
        self.entries: Listing | list[Entry] = []
        self.biggest = 0
        self._about: dict[str, object] = {}
        self.now = time.time() if now is None else now

    def show(self, entries: Listing, cursor: int = 0) -> None:
        self.entries = entries
        self.biggest = entries.biggest(self.view.apparent)
        self._about.clear()
        self.virtual_size = Size(self.size.width, len(entries))
        self.cursor = min(max(cursor, 0), max(len(entries) - 1, 0))
        self.refresh()

    def replanned(self) -> None:
        self._about.clear()
        self.refresh()

    @property
    def selected(self) -> Entry | None:
        return self.entries[self.cursor] if 0 <= self.cursor < len(self.entries) else None

    def watch_cursor(self, old: int, new: int) -> None:
        top = self.scroll_offset.y
        if not top <= new < top + self.scrollable_content_region.height:
            # scrolled only when it must be: a scroll repaints the scrollbars too
            self.scroll_to_region(Region(0, new, 1, 1), animate=False, force=True)
        self.refresh()
        if self.moved is not None:
            self.moved()

    def about(self, e: Entry):
        if not e.markable:
            return None
        a = self._about.get(e.path)
        if a is None:
            a = self._about[e.path] = self.vol.about(e.path)
        return a

    def render_line(self, y: int) -> Strip:
        i = self.scroll_offset.y + y
        width = self.size.width
        if i >= len(self.entries):
            return Strip.blank(width)
        e = self.entries[i]
        segs = rows.line(self.vol, e, self.about(e), self.view, self.biggest, width, now=self.now)
        strip = Strip(segs)
        if i == self.cursor:
            strip = strip.apply_style(Style(reverse=True))
        return strip.adjust_cell_length(width)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.entries))

    def action_move(self, d: int) -> None:
        self.cursor = min(max(self.cursor + d, 0), max(len(self.entries) - 1, 0))

    def action_page(self, d: int) -> None:
        self.action_move(d * max(self.size.height - 1, 1))

    def action_edge(self, end: int) -> None:
        self.cursor = max(len(self.entries) - 1, 0) if end else 0

    def on_click(self, event) -> None:
        i = self.scroll_offset.y + event.y
        if 0 <= i < len(self.entries):
            self.cursor = i


class Browse(App):
    """The browser. ``volume``: an observation made browsable, or ``load``: a function
    giving one (observing first: the screen shows that it is under way); ``writer``: what
    ``w`` writes through (:class:`vacate.browse.write.Writer`), or None."""

    TITLE = "vacate browse"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #head { height: 2; background: $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    EntryList { height: 1fr; min-height: 5; overflow-y: scroll; scrollbar-size-vertical: 0; }
    /* no scrollbar (the header says where the cursor is): a scrollbar appearing, or
       repainted after the list, would take a frame of its own */
    #detail { height: 9; border-top: solid $accent; padding: 0 1; overflow-y: auto; }
    #cmd { height: 1; background: $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    Screen.tall #detail { height: 16; }
    """ + SCREENS_CSS
    BINDINGS: ClassVar[list] = [
        Binding("enter,right,l", "into", "into"),
        Binding("left,backspace,h", "up", "up"),
        Binding("space", "menu", "mark"),
        Binding("d", "delete", "delete"),
        Binding("s", "sort('size')", "size", show=False),
        Binding("n", "sort('name')", "name"),
        Binding("M", "sort('mtime')", "mtime", show=False),
        Binding("a", "apparent", "apparent"),
        Binding("f", "filter_status", "status"),
        Binding("t", "filter_kind", "kind", show=False),
        Binding("w", "write", "write"),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit_asking", "quit"),
    ]

    def __init__(self, volume: Volume | None = None, *, load=None, writer=None,
                 what: str = "", now: float | None = None):
        super().__init__()
        self.now = now            # ages are counted to it (tests fix it); now by default
        self.vol = volume
        self.load = load
        self.writer = writer
        self.what = what
        self.cwd = volume.root if volume is not None else ""
        self.written_marks: dict[str, str] | None = {}
        self.written: tuple[str, str] | None = None     # (plan file, the command), once written
        self.busy = False
        self.message = ""
        self.timing = timing.from_env()
        self._detail_lines = 0

    # -- the keypress timing (VACATE_BROWSE_TIMING) ------------------------------------------
    async def on_event(self, event: events.Event) -> None:
        if self.timing is not None and isinstance(event, events.Key) and not event.is_forwarded:
            self.timing.key(event.key, event.time)
        await super().on_event(event)

    def post_display_hook(self) -> None:
        if self.timing is not None:
            self.timing.displayed()

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(Text(""), id="head")
        if self.vol is not None:
            yield EntryList(self.vol, moved=self._moved, now=self.now, id="list")
        else:
            yield Static(Text(f"observing {shown(self.what)} ...  (the walk, the users, the "
                              "configs; Ctrl-C stops)"), id="list")
        yield Static(Text(""), id="detail")
        yield Static(Text(""), id="cmd")
        yield Footer()

    def on_mount(self) -> None:
        self.set_class(self.size.height >= 40, "tall", update=False)
        if self.vol is not None:
            self._show_volume()
        else:
            self.started = time.monotonic()
            self.set_interval(0.5, self._tick, name="tick")
            self._observe()

    def on_resize(self, event) -> None:
        self.screen.set_class(event.size.height >= 40, "tall")

    def _tick(self) -> None:
        if self.vol is None:
            s = time.monotonic() - self.started
            self.query_one("#list", Static).update(Text(
                f"observing {shown(self.what)} ...  {s:.0f} s  (the walk, the users, the "
                "configs; Ctrl-C stops)"))

    @work(thread=True, exclusive=True)
    def _observe(self) -> None:
        try:
            vol = self.load()
        except Exception as e:  # noqa: BLE001 (shown, then quit with it)
            self.call_from_thread(self._failed, e)
            return
        self.call_from_thread(self._loaded, vol)

    def _failed(self, e: Exception) -> None:
        self.exit(e)

    async def _loaded(self, vol: Volume) -> None:
        self.vol = vol
        self.cwd = vol.root
        old = self.query_one("#list")
        await old.remove()
        await self.mount(EntryList(vol, moved=self._moved, now=self.now, id="list"),
                         after=self.query_one("#head"))
        self._show_volume()

    def _show_volume(self) -> None:
        lst = self.query_one(EntryList)
        lst.focus()
        self.screen.set_class(self.size.height >= 40, "tall")
        self.refill()

    @property
    def lst(self) -> EntryList:
        return self.query_one(EntryList)

    def refill(self, select: str | None = None) -> None:
        lst = self.lst
        entries = self.vol.listing(self.cwd, lst.view)
        at = entries.index_of(select) if select else None
        lst.show(entries, at or 0)
        self.redraw()

    def redraw(self) -> None:
        if self.vol is None:
            return
        lst = self.lst
        # the head and the command line are a fixed number of lines: no layout (a layout of
        # the screen costs as much as drawing it); the detail pane only when it scrolls and
        # its length changed (its scrollbar then changes)
        self.query_one("#head", Static).update(rows.header(self.vol, self.cwd, lst.view,
                                                           (lst.cursor, len(lst.entries))),
                                               layout=False)
        detail = self.query_one("#detail", Static)
        text = rows.detail(self.vol, lst.selected)
        lines = _lines(text, detail.content_size.width)
        detail.update(text, layout=lines != self._detail_lines
                      and max(lines, self._detail_lines) > detail.content_size.height)
        self._detail_lines = lines
        self.query_one("#cmd", Static).update(self._cmd_text(), layout=False)

    def _cmd_text(self) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        if self.message:
            t.append(self.message, Style(bold=True))
        elif self.vol.marks or self.vol.loaded_plan is None:
            t.append("$ " + self._command(), Style(dim=True))
        return t

    def _command(self) -> str:
        """The ``vacate plan`` command line that makes the plan the marks make."""
        if self.writer is not None:
            return self.writer.command(self.vol)
        from vacate.browse.write import command_line

        return command_line(self.vol, None)

    def _moved(self) -> None:
        self.message = ""
        self.redraw()

    # -- moving ----------------------------------------------------------------------------
    def action_into(self) -> None:
        e = self.lst.selected if self.vol else None
        if e is not None and e.is_dir:
            self.cwd = e.path
            self.refill()

    def action_up(self) -> None:
        if self.vol is None or self.cwd == self.vol.root:
            return
        was = self.cwd
        self.cwd = os.path.dirname(self.cwd)
        self.refill(select=was)

    def action_sort(self, by: str) -> None:
        if self.vol is None:
            return
        keep = self.lst.selected
        self.lst.view.sort = by
        self.refill(select=keep.path if keep else None)

    def action_apparent(self) -> None:
        if self.vol is None:
            return
        keep = self.lst.selected
        self.lst.view.apparent = not self.lst.view.apparent
        self.refill(select=keep.path if keep else None)

    def action_filter_status(self) -> None:
        if self.vol is None:
            return
        order = (None, *STATUSES)
        v = self.lst.view
        v.status = order[(order.index(v.status) + 1) % len(order)]
        self.refill()

    def action_filter_kind(self) -> None:
        if self.vol is None:
            return
        order = [None, *self.vol.kinds()]
        v = self.lst.view
        v.kind = order[(order.index(v.kind) + 1) % len(order)] if v.kind in order else None
        self.refill()

    # -- marking ---------------------------------------------------------------------------
    def _markable(self) -> Entry | None:
        e = self.lst.selected if self.vol else None
        if e is None or not e.markable:
            self._say("the files of this directory are not named one by one: mark the "
                      "directory, or a file the listing names (vacate observe -o OBS "
                      "--files names every file)")
            return None
        if self.vol.loaded_plan is not None and e.path not in self.vol.plan_items:
            self._say("a loaded plan's items alone can be marked (its actions are edited); "
                      "for other paths make a new plan from its observation")
            return None
        return e

    def action_menu(self) -> None:
        e = self._markable()
        if e is None:
            return

        def chosen(name):
            if name == "unmark":
                self._set_mark(e, None)
            elif name == "delete":
                self._delete(e)
            elif name:
                self._set_mark(e, name)
        self.push_screen(ActionMenu("mark " + shown(e.path) + ("/" if e.is_dir else "")),
                         chosen)

    def action_delete(self) -> None:
        e = self._markable()
        if e is not None:
            self._delete(e)

    def _delete(self, e: Entry) -> None:
        before = self.vol.marks.get(e.path)
        self._set_mark(e, "delete")
        item = self.vol.planned_item(e.path)
        back = item.get_back if item is not None else ""
        if back.startswith(("download again", "regenerate")) or (
                back.startswith("what it holds") and "gone for good" not in back
                and "only the snapshot" not in back):      # each thing it holds has one
            return
        text = Text()
        text.append("delete ", Style(bold=True))
        text.append(shown(e.path) + ("/" if e.is_dir else ""), Style(bold=True))
        text.append(f"?\n\nNothing is known to get it back: {back or 'no source is known'}.\n"
                    "It is only marked now; the plan deletes it when applied.\n")

        def answered(yes):
            if not yes:
                self._set_mark(e, before)
                self._say("not marked for delete")
        self.push_screen(Ask(text), answered)

    def _set_mark(self, e: Entry, action: str | None) -> None:
        self.vol.mark(e.path, action)
        self.lst.replanned()
        self.message = ""
        if self.vol.plan_error:
            self._say("the planner refuses: " + shown(self.vol.plan_error))
        self.redraw()

    def _say(self, text: str) -> None:
        self.message = text
        self.redraw()

    @property
    def unsaved(self) -> bool:
        return self.vol is not None and self.vol.marks != self.written_marks

    # -- writing ---------------------------------------------------------------------------
    def action_write(self) -> None:
        if self.vol is None or self.busy:
            return
        if self.writer is None:
            self._say("nothing to write with here")
            return
        if not self.writer.output:
            self._say("no plan file: start vacate browse with -o PLAN to write one")
            return
        self.busy = True
        self._say(f"making the plan: looking at the volume again on {self.writer.where()} ...")
        self._prepare(dict(self.vol.marks))

    @work(thread=True, exclusive=True, group="write")
    def _prepare(self, marks: dict) -> None:
        from vacate.observing.errors import VacateError

        try:
            got = self.writer.prepare(self.vol)
        except VacateError as e:
            self.call_from_thread(self._refused, e.message + (f" ({e.hint})" if e.hint else ""))
            return
        self.call_from_thread(self._prepared, got, marks)

    def _refused(self, why: str) -> None:
        self.busy = False
        self._say("not written: " + shown(why))
        t = Text()
        t.append("not written\n\n", Style(bold=True, color="red"))
        t.append(shown(why))
        self.push_screen(Page(t))

    def _prepared(self, got, marks: dict) -> None:
        if not got.changes:
            self._commit(got, marks)
            return
        t = Text()
        t.append("the volume changed since it was observed:\n\n", Style(bold=True))
        for c in got.changes[:40]:
            t.append("  " + shown(c) + "\n")
        if len(got.changes) > 40:
            t.append(f"  ... and {len(got.changes) - 40} more\n")
        t.append("\nwrite the plan made from the volume as it is now?\n")

        def answered(yes):
            if yes:
                self._commit(got, marks)
            else:
                self.busy = False
                self._say("not written")
        self.push_screen(Ask(t), answered)

    def _commit(self, got, marks: dict) -> None:
        from vacate.observing.errors import VacateError

        self.busy = False
        try:
            path = self.writer.commit(got)
        except (OSError, VacateError) as e:
            self._refused(str(getattr(e, "message", e)))
            return
        self.written_marks = marks
        plan = got.plan
        t = Text()
        t.append(f"written to {shown(path)}", Style(bold=True, color="green"))
        t.append(f" (made on {self.writer.where()})\n\nthe same plan in a script:\n")
        command = self._command()
        self.written = (path, command)
        t.append(shell_lines(command, self.size.width) + "\n\n")
        for line in got.looked_again:
            t.append(shown(line) + "\n", Style(dim=True))
        for it in plan.items:
            t.append(f"  {it.action:<8} ", rows.ACTION_STYLE.get(it.action, Style()))
            t.append(shown(it.path) + "\n")
        if plan.blocked:
            t.append("\ncannot be applied as it stands:\n", Style(color="yellow", bold=True))
            for b in plan.blocked:
                t.append("  " + shown(b) + "\n")
        t.append(f"\nreview it, then: vacate apply {shown(path)}\n")
        self._say(f"written to {shown(path)}")
        self.push_screen(Page(t, bare=True))

    # -- help and quitting -----------------------------------------------------------------
    def action_help(self) -> None:
        t = Text()
        t.append("vacate browse: keys\n\n", Style(bold=True))
        for k, say in HELP:
            t.append(f"  {k:<16}", Style(bold=True))
            t.append(say + "\n")
        t.append("\nStatus: active (used now), referenced (configured, not running), cold, "
                 "disposable, artifact. Nothing is applied from here: w writes a plan to "
                 "review, then vacate apply PLAN.\n", Style(dim=True))
        self.push_screen(Page(t))

    def action_quit_asking(self) -> None:
        if not self.unsaved:
            self.exit(0)
            return
        n = len(self.vol.marks)
        t = Text(f"{n} mark" + ("s are" if n != 1 else " is") + " not written to a plan.\n"
                 "Quit anyway and lose them?\n")
        self.push_screen(Ask(t), lambda yes: self.exit(0) if yes else None)


def shell_lines(command: str, width: int) -> str:
    """``command`` (a shell line) as lines of at most ``width`` cells where its words allow,
    each but the last ended by `` \\``: pasted into a shell, the same command, and no line
    wraps on the screen (a wrapped line is copied from a terminal as two)."""
    width = max(width, 20)
    prose, _, rest = command.rpartition("vacate plan ")
    if prose:       # "edit the items' actions (...), then vacate plan --from ...": on its own
        return prose.rstrip() + "\n" + shell_lines("vacate plan " + rest, width)
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    # an option stays on one line with its value (--keep eagle3/cache)
    groups: list[str] = []
    for word in (shlex.quote(w) for w in words):
        if groups and groups[-1].startswith("-") and " " not in groups[-1] \
                and not word.startswith("-"):
            groups[-1] += " " + word
        else:
            groups.append(word)
    lines, line = [], ""
    for group in groups:
        if line and len(line) + 1 + len(group) + 2 > width:
            lines.append(line)
            line = "  " + group
        else:
            line = f"{line} {group}" if line else group
    lines.append(line)
    return " \\\n".join(lines)


def _lines(text: Text, width: int) -> int:
    """How many lines ``text`` takes at ``width`` cells, wrapped (an upper bound)."""
    width = max(width, 1)
    return sum(max(1, -(-len(ln) // width)) for ln in text.plain.split("\n"))
