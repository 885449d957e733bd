"""The one object holding a command's streams and terminal facts (httpie-style), so the CLI
runs in-process in tests."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from vacate.observing.host import Host

# typing is imported only by type checkers (its import is a measurable part of start-up)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO


@dataclass(slots=True)
class Env:
    """A command's streams, terminal facts and host (tests pass their own)."""
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    stdin: TextIO | None = field(default_factory=lambda: sys.stdin)
    host: Host = field(default_factory=Host.local)
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def stdout_isatty(self) -> bool:
        return bool(getattr(self.stdout, "isatty", lambda: False)())

    @property
    def stderr_isatty(self) -> bool:
        return bool(getattr(self.stderr, "isatty", lambda: False)())

    @property
    def stdin_isatty(self) -> bool:
        return bool(self.stdin is not None and getattr(self.stdin, "isatty", lambda: False)())

    def console(self, *, stderr: bool = False):
        """A rich Console on stdout (data) or stderr (progress, logs)."""
        from rich.console import Console

        stream = self.stderr if stderr else self.stdout
        return Console(file=stream, highlight=False, soft_wrap=False,
                       force_terminal=None if (self.stderr_isatty if stderr else self.stdout_isatty)
                       else False,
                       width=None if (self.stderr_isatty if stderr else self.stdout_isatty)
                       else 160)
