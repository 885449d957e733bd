"""What each command's exit status means, for its ``--help`` (the codes are
:mod:`vacate.observing.errors`'; apply's and plan's 4 are their own)."""

from __future__ import annotations

USAGE = (2, "usage error, or a file named that cannot be read or written (said in one line)")
STALL = "or, with --host, the far side went silent (--stall-timeout)"

EXITS: dict[str, tuple[tuple[int, str], ...]] = {
    "demo": ((0, "done"), USAGE),
    "scan": ((0, "done"), (3, "something could not be read: its sizes may be short (named in "
                              "the warnings), " + STALL), USAGE),
    "check": ((0, "safe to unmount"), (1, "in use (the blockers are listed)"),
              (3, "could not tell: something could not be read, or (--inventory) a host "
                  "could not be told, " + STALL), USAGE),
    "observe": ((0, "observed (what could not be read is among its problems)"),
                (3, "the volume's filesystem does not answer, " + STALL), USAGE),
    "plan": ((0, "the plan is written or shown and can be applied"),
             (4, ("made, but it cannot be applied as it stands (an item to archive has no "
                 "--archive-to, or what uses the volume could not be told): said why")),
             (3, STALL.removeprefix("or, ")), (2, "refused (the volume the system runs "
                                                  "from, an override that matches nothing) "
                                                  "or " + USAGE[1])),
    "apply": ((0, "retired: every step done, the volume unmounted"),
              (4, ("all vacate can do is done and manual steps remain (listed: e.g. a "
                  "container's restart)")),
              (1, ("a step failed: it stops there, the journal says where, and applying "
                  "again resumes")),
              (3, "could not tell whether a step is done"),
              (2, "refused (not approved, a stale or edited plan, another host) or "
                  + USAGE[1])),
    "undo": ((0, "every repointing reversed (or none to reverse)"),
             (1, "one could not be (named)"), USAGE),
    "report": ((0, "done"), USAGE),
    "browse": ((0, "quit"), (3, "the volume could not be observed, " + STALL), USAGE),
    "archive": ((0, "done (or, onto a complete archive, up to date)"),
                (1, ("a file changed while it was read, something the sources hold is not in "
                    "the archive, or the sources changed since the complete archive there "
                    "was made (each named)")),
                (3, "something could not be read (see the warnings)"),
                (2, ("usage error, or the target could not be written (a full disk: the "
                    "unfinished part is removed, the finished ones kept for a rerun, "
                    "which resumes)"))),
    "verify": ((0, ("every part and file checks (a native archive: received and equal to its "
                   "source with --verify-pool; without it only parsed, said so)")),
               (1, "a mismatch was found (named)"),
               (3, "something could not be read"), USAGE),
    "restore": ((0, ("all restored, every file checked (a native archive: received, its "
                    "snapshot's guid the archived one)")),
                (1, ("something was not restored, or not as archived (named; a native "
                    "archive's half-received dataset is destroyed)")),
                (3, "something could not be read"), USAGE),
    "payload": ((0, "written"), USAGE),
    "collection": ((0, "built: the tarball's path on stdout"),
                   (2, "ansible-galaxy missing or failed, no collection sources here (it is "
                       "built from a checkout), or " + USAGE[1])),
}


def epilog(command: str) -> str | None:
    """The lines ``--help`` ends with: each exit status and what it means."""
    codes = EXITS.get(command)
    if not codes:
        return None
    return "exit status:\n" + "\n".join(f"  {n}  {say}" for n, say in codes)
