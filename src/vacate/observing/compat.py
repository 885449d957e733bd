"""What differs between the CPythons the observing layer runs on (3.8 and newer).

``SLOTS`` is passed to ``@dataclass``: slotted classes where the interpreter has them (3.10+),
plain ones before. :func:`exit_code` is ``os.waitstatus_to_exitcode`` (3.9+).
"""

import fcntl
import os
import sys

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)    # Linux's value, named in 3.10
SLOTS = {"slots": True} if sys.version_info >= (3, 10) else {}


def widen_pipe(fd: int, wanted: int) -> None:
    """Let the pipe ``fd`` hold ``wanted`` bytes where the system lets (CAP_SYS_RESOURCE),
    else fs.pipe-max-size (1 MB by default); as it is where neither can be had."""
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, wanted)
        return
    except OSError:
        pass
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            fcntl.fcntl(fd, F_SETPIPE_SZ, min(wanted, int(f.read())))
    except (OSError, ValueError):
        pass


def exit_code(status: int) -> int:
    """The exit code a wait status says (negative: killed by that signal)."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def cut_suffix(text: str, suffix: str) -> str:
    """``text.removesuffix(suffix)`` (3.9+)."""
    return text[:-len(suffix)] if suffix and text.endswith(suffix) else text


def cut_prefix(text: str, prefix: str) -> str:
    """``text.removeprefix(prefix)`` (3.9+)."""
    return text[len(prefix):] if text.startswith(prefix) else text
