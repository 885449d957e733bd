"""The files a command line names, checked as it is parsed: a file to read that is missing,
unreadable, a directory or empty, and a file to write whose directory is missing or that is a
directory, are one line naming the argument and exit 2 (argparse's usage error), never a
traceback from deep inside the command.

A file to read may be a pipe (``--from <(ssh host vacate observe /data)``) or ``-`` (stdin)
where the command says so; only a regular file can be told empty."""

from __future__ import annotations

import argparse
import os
import stat


def _bad(path: str, why: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"{path}: {why[:1].lower()}{why[1:]}")


def readable_file(path: str, *, stdin: bool = False) -> str:
    """``path`` if it can be read as a file: it exists, is not a directory, can be opened,
    and (a regular file) is not empty."""
    if stdin and path == "-":
        return path
    try:
        st = os.stat(path)
    except OSError as e:
        raise _bad(path, e.strerror or str(e)) from None
    if stat.S_ISDIR(st.st_mode):
        raise _bad(path, "is a directory, not a file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise _bad(path, f"cannot be read ({e.strerror or e})") from None
    os.close(fd)
    if stat.S_ISREG(st.st_mode) and st.st_size == 0:
        raise _bad(path, "is empty")
    return path


def readable_or_stdin(path: str) -> str:
    """As :func:`readable_file`; ``-`` is standard input."""
    return readable_file(path, stdin=True)


def writable_file(path: str) -> str:
    """``path`` if a file can be written there: its directory exists and is a directory, and
    ``path`` itself is not a directory."""
    if os.path.isdir(path):
        raise _bad(path, "is a directory: name a file to write")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise _bad(path, f"its directory {parent} does not exist" if not os.path.exists(parent)
                   else f"{parent} is not a directory")
    return path


def archive_place(where: str) -> str:
    """An archive: ``s3://...``, or a directory (a file named as one is refused)."""
    if where.startswith("s3://"):
        return where
    if os.path.exists(where) and not os.path.isdir(where):
        raise _bad(where, "is a file; an archive is a directory (DEST/NAME) or s3://bucket/"
                          "prefix/NAME")
    if not os.path.exists(where):
        raise _bad(where, "no such archive")
    if not os.access(where, os.R_OK | os.X_OK):
        raise _bad(where, "cannot be read (Permission denied)")
    return where


def inventory(source: str) -> str:
    """An Ansible inventory: a host list (``a,b,``) as it is; a file or a directory that can
    be read (a file not empty)."""
    if "," in source:
        return source
    if os.path.isdir(source):
        if not os.access(source, os.R_OK | os.X_OK):
            raise _bad(source, "cannot be read (Permission denied)")
        return source
    return readable_file(source)
