"""Where a plan's entries files are kept: beside the plan file, or (for a plan written only to
stdout) in the user's state directory. Files are named by their sha256, so plans share the
store safely. Standard library only: a far host's apply looks them up the same way."""

from __future__ import annotations

import os


def entries_store() -> str:
    """Where entries files go when the plan is not written to a file (``-o``):
    ``$XDG_STATE_HOME/vacate/entries``, by default ``~/.local/state/vacate/entries``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "state")
    return os.path.join(base, "vacate", "entries")


def find_entries_file(name, plan_path: str) -> str | None:
    """The entries file ``name`` of the plan in ``plan_path``: beside the plan first, then in
    the store; None when it is in neither, or ``name`` is not a plain file name."""
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        return None
    beside = os.path.dirname(os.path.abspath(plan_path)) if plan_path else None
    for d in filter(None, (beside, entries_store())):
        if os.path.isfile(os.path.join(d, name)):
            return os.path.join(d, name)
    return None
