"""The small screens over the browser: the action menu, a yes/no question (the default is
no), and a page of text (help, what was written). All text is rich Text: no markup."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

MENU = (("keep", "k", "keep: stays on the volume and goes cold with it"),
        ("archive", "a", "archive: copied to the destination, verified"),
        ("delete", "d", "delete: removed when the plan is applied"),
        ("unmark", "u", "unmark: back to what the planner decides"))

# the app's stylesheet takes these (a screen's DEFAULT_CSS is scoped to its own children)
CSS = """
ActionMenu, Ask, Page { align: center middle; }
#box { width: 76; max-width: 100%; height: auto; max-height: 90%; border: round $accent;
       background: $surface; padding: 0 1; }
#box OptionList { height: auto; border: none; }
#page { width: 100%; height: auto; max-height: 100%; }
#box.bare { width: 100%; border: none; padding: 0; }
"""


class ActionMenu(ModalScreen):
    """Space: keep, archive, delete or unmark the selected entry, chosen by its first letter
    or with the arrows and Enter. Dismissed with the action, "unmark", or None."""

    BINDINGS = [Binding(key, f"pick('{name}')", name, show=False) for name, key, _ in MENU] + \
        [Binding("escape,q", "pick(None)", "cancel")]

    def __init__(self, title: str):
        super().__init__()
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="box"):
            yield Static(Text(self.title_text, no_wrap=True, overflow="ellipsis"))
            yield OptionList(*[Option(Text(f"{key}  {say}"), id=name)
                               for name, key, say in MENU])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_pick(self, name: str | None) -> None:
        self.dismiss(name)


class Page(ModalScreen):
    """A page of text (help, what was written); any of q, Escape, Enter, ? closes it."""

    BINDINGS: ClassVar[list] = [Binding("escape,q,enter,question_mark", "close", "close")]
    FOOTER: Text | None = None     # a line under the page (what the keys do)

    def __init__(self, text: Text, *, bare: bool = False):
        """``bare``: no border, the whole width (a command line on it is copied from the
        terminal without box characters)."""
        super().__init__()
        self.text = text
        self.bare = bare

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="box", classes="bare" if self.bare else ""):
            yield Static(self.text, id="page")
            if self.FOOTER is not None:
                yield Static(self.FOOTER)

    def action_close(self) -> None:
        self.dismiss(None)


class Ask(Page):
    """A question answered with ``y``; anything else (``n``, Enter, Escape) is no."""

    BINDINGS: ClassVar[list] = [Binding("y", "answer(True)", "yes"),
                Binding("n,enter,escape,q", "answer(False)", "no (default)")]
    FOOTER = Text("y: yes    n / Enter: no", style="bold")
    inherit_bindings = False       # only y is yes: no key of the page's that closes it

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
