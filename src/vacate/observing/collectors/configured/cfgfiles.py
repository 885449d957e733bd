"""Reading config files of a host for the configured-user sources: the host's own spelling of a
path, file text and directory listings with problems instead of exceptions, and evidence for a
config line (secrets redacted, long text cut). Standard library only.

Every file a config names (an ``EnvironmentFile=``, an include, a drop-in, a crontab) is read
through :func:`read_text`: opened without blocking, read only when it is a regular file, and
within a bound. The errors mean the same everywhere (:func:`vacate.observing.fsio.read_problem`): missing
is nothing; unreadable, not a regular file, or larger than the bound is a problem that makes
the verdict "could not tell".
"""

from __future__ import annotations

import hashlib
import os
import stat

from vacate.observing.fsio import NotRegular, cut_problem, read_bounded, read_problem
from vacate.observing.host import Host
from vacate.observing.model.common import Problem
from vacate.observing.model.usage import Evidence
from vacate.observing.parsers.redact import bound, shown_text

MAX_BYTES = 4 << 20         # larger config files are not read whole (a problem, not a cut)
_DEV_NULL = os.makedev(1, 3)


def spelled(host: Host, local: str) -> str:
    """How the host itself spells ``local`` (a path below ``host.root`` as seen from here)."""
    return host.spell(local)


def _is_dev_null(local: str) -> bool:
    """A config linked to ``/dev/null`` (masked): empty, not unreadable."""
    try:
        st = os.stat(local)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == _DEV_NULL


def read_text(host: Host, local: str, limit: int = MAX_BYTES, *, named: str | None = None
              ) -> tuple[str | None, Problem | None]:
    """The text of a config file: (None, None) when it does not exist, (None, Problem) when it
    exists but cannot be read or is not a regular file (a FIFO, a device, a socket), and
    (the first ``limit`` bytes, Problem) when it is larger: what an unread config says is
    unknown. A link to ``/dev/null`` (a masked file) is empty. ``named``: the path as the
    config spells it, when ``local`` is where its links were resolved to (problems name it)."""
    where = spelled(host, local)
    path = named or where
    shown = bound(where if named in (None, where) else f"{named} (-> {where})")
    try:
        data, more = read_bounded(local, limit)
    except NotRegular as e:
        if _is_dev_null(local):
            return "", None
        return None, read_problem(e, shown, code="unreadable-config", path=path)
    except OSError as e:
        return None, read_problem(e, shown, code="unreadable-config", path=path)
    text = data.decode("utf-8", "surrogateescape")
    return text, cut_problem(shown, limit, path) if more else None


def list_dir(host: Host, local: str, suffix: str = "") -> tuple[list[str], Problem | None]:
    """Sorted entries of a config directory (full local paths), ending in ``suffix``: none
    when it does not exist, a problem when it cannot be listed."""
    try:
        names = sorted(os.listdir(local))
    except OSError as e:
        where = spelled(host, local)
        return [], read_problem(e, bound(where), code="unreadable-config", path=where)
    return [os.path.join(local, n) for n in names if n.endswith(suffix)], None


def line_evidence(kind: str, path: str | None, source: str, line: int, raw: str,
                  note: str = "") -> Evidence:
    """Evidence for one config line: ``source:line`` and the line, secrets redacted and a
    long line cut (the path stays exact: it is data)."""
    detail = shown_text(raw.strip())
    if note:
        detail = f"{detail}  ({shown_text(note)})"
    return Evidence(kind, path, f"{source}:{line}", detail)


def line_sha256(raw: str) -> str:
    """The sha256 of one line as the file has it (the bytes the text was decoded from), which
    an edit of that line checks the file against before it changes it."""
    return hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()
