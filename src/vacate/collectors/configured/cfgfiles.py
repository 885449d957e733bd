"""Reading config files of a host for the configured-user sources: the host's own spelling of a
path, file text with problems instead of exceptions, and evidence for a config line (redacted).
Standard library only.
"""

from __future__ import annotations

import os

from vacate.host import Host
from vacate.model.common import Problem
from vacate.model.usage import Evidence
from vacate.parsers.redact import redact_text


def spelled(host: Host, local: str) -> str:
    """How the host itself spells ``local`` (a path below ``host.root`` as seen from here)."""
    if host.root == "/":
        return local
    rel = os.path.relpath(local, host.root)
    return "/" if rel == "." else "/" + rel


def read_text(host: Host, local: str) -> tuple[str | None, Problem | None]:
    """The text of a config file; (None, None) when it does not exist, (None, Problem) when it
    exists but cannot be read: an unread config makes the verdict unknown."""
    try:
        with open(local, "rb") as f:
            return f.read().decode("utf-8", "surrogateescape"), None
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except IsADirectoryError:
        return None, Problem("malformed-config", f"{spelled(host, local)} is a directory",
                             spelled(host, local))
    except OSError as e:
        return None, Problem("unreadable-config",
                             f"cannot read {spelled(host, local)}: {e.strerror}",
                             spelled(host, local), blocks_verdict=True)


def list_dir(host: Host, local: str, suffix: str = "") -> tuple[list[str], Problem | None]:
    """Sorted entries of a config directory (full local paths), ending in ``suffix``."""
    try:
        names = sorted(os.listdir(local))
    except (FileNotFoundError, NotADirectoryError):
        return [], None
    except OSError as e:
        return [], Problem("unreadable-config",
                           f"cannot list {spelled(host, local)}: {e.strerror}",
                           spelled(host, local), blocks_verdict=True)
    return [os.path.join(local, n) for n in names if n.endswith(suffix)], None


def line_evidence(kind: str, path: str | None, source: str, line: int, raw: str,
                  note: str = "") -> Evidence:
    """Evidence for one config line: ``source:line`` and the line, secrets redacted."""
    detail = redact_text(raw.strip())
    if note:
        detail = f"{detail}  ({note})"
    return Evidence(kind, path, f"{source}:{line}", detail)
