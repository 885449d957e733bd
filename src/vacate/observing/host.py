"""The one object that says where a host's system trees are.

Every reader takes a :class:`Host` instead of hard-coding ``/proc`` or ``/etc``, so tests can
point it at a captured tree and a container can be audited through ``/proc/PID/root``.
Standard library only: collectors import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from vacate.observing.compat import SLOTS


@dataclass(frozen=True, **SLOTS)
class Host:
    """Roots of one host's system trees.

    ``root`` is the host's ``/`` as seen from here: ``"/"`` for the machine we run on,
    ``/proc/PID/root`` for a container, a directory for a captured tree.
    """

    root: str = "/"
    proc: str = "/proc"
    sys: str = "/sys"
    etc: str = "/etc"
    run: str = "/run"
    live: bool = True  # False for a captured tree: no syscalls on the live machine apply

    @classmethod
    def local(cls) -> Host:
        return cls()

    @classmethod
    def under(cls, root: str, *, live: bool = False, proc: str | None = None) -> Host:
        """A host whose trees all live below ``root`` (a captured tree or a container root)."""
        root = os.path.abspath(root)
        return cls(
            root=root,
            proc=proc if proc is not None else os.path.join(root, "proc"),
            sys=os.path.join(root, "sys"),
            etc=os.path.join(root, "etc"),
            run=os.path.join(root, "run"),
            live=live,
        )

    def _below_root(self, abspath: str) -> str:
        if self.root == "/":
            return abspath
        return os.path.join(self.root, abspath.lstrip("/"))

    def _trees(self):
        """(the host's name, where it lies from here) of each tree kept apart from ``root``
        (``etc`` pointed at a copy while ``root`` stays ``/``)."""
        for name, local in (("/proc", self.proc), ("/sys", self.sys), ("/etc", self.etc),
                            ("/run", self.run)):
            if local != self._below_root(name):
                yield name, local.rstrip("/") or "/"

    def path(self, abspath: str) -> str:
        """Where an absolute path of this host lies from here: below its tree for a path in
        ``/proc``, ``/sys``, ``/etc`` or ``/run``, else below ``root``."""
        for name, local in self._trees():
            if abspath == name or abspath.startswith(name + "/"):
                return local + abspath[len(name):]
        return self._below_root(abspath)

    def spell(self, local: str) -> str:
        """How the host itself spells ``local`` (a path as seen from here): the inverse of
        :meth:`path`."""
        for name, tree in self._trees():
            if local == tree or local.startswith(tree + "/"):
                return name + local[len(tree):]
        if self.root == "/":
            return local
        rel = os.path.relpath(local, self.root)
        return "/" if rel == "." else "/" + rel

    def proc_path(self, *parts: str | int) -> str:
        return os.path.join(self.proc, *map(str, parts))

    def sys_path(self, *parts: str) -> str:
        return os.path.join(self.sys, *parts)

    def etc_path(self, *parts: str) -> str:
        return os.path.join(self.etc, *parts)

    def run_path(self, *parts: str) -> str:
        return os.path.join(self.run, *parts)
