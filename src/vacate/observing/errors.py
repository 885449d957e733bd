"""Errors that reach the user: a message, a hint, and the exit code they mean."""

from __future__ import annotations

# Exit codes shared by every command.
EXIT_OK = 0          # done / safe to unmount
EXIT_IN_USE = 1      # check: the volume is in use; verify: a mismatch was found
EXIT_ERROR = 2       # usage or runtime error
EXIT_UNKNOWN = 3     # could not tell (something could not be read)


class VacateError(Exception):
    """An error with a message for people, an optional hint, and an exit code."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(VacateError):
    """The command line asks for something that cannot be done."""


class NotFound(VacateError):
    """A path or object named by the user does not exist."""


class Unanswered(VacateError):
    """The filesystem holding the target does not answer (a dead FUSE daemon, an NFS server
    gone): nothing about its users can be told. ``target``: what mountinfo tells of it (a
    :class:`vacate.observing.model.Target` on the mount that does not answer, its space unknown), for
    reports."""

    exit_code = EXIT_UNKNOWN

    def __init__(self, message: str, *, target, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.target = target
