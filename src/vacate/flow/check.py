"""``check``: everything that uses the volume, each item's status, and the verdict: what
:func:`vacate.observing.observe.observe` sees, decided by :func:`vacate.decide.verdict.check`.
Prints nothing."""

from __future__ import annotations

from vacate.decide import verdict
from vacate.observing.host import Host
from vacate.observing.model.usage import CheckResult
from vacate.observing.observe import observe


def check(path: str, *, host: Host | None = None, scan_tree: bool = True,
          configured: bool = True, nvml=None, early=None) -> CheckResult:
    """``early``: a :class:`vacate.observing.collectors.procs_probe.Early` the CLI started (or None)."""
    return verdict.check(observe(path, host=host, scan_tree=scan_tree, configured=configured,
                                 nvml=nvml, early=early))
