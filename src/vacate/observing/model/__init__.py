"""The data model: frozen values every layer passes around.

Standard library only (collectors build these values).
"""

from vacate.observing.model.common import Problem
from vacate.observing.model.inventory import (
    Classification,
    DirSummary,
    FileEntry,
    Item,
    ScanResult,
    Stats,
)
from vacate.observing.model.mount import Mount, Target
from vacate.observing.model.usage import (
    Blocker,
    CheckResult,
    Consumer,
    Evidence,
    ItemUsage,
    Verdict,
)

__all__ = [
    "Blocker", "CheckResult", "Classification", "Consumer", "DirSummary", "Evidence", "FileEntry",
    "Item", "ItemUsage", "Mount", "Problem", "ScanResult", "Stats", "Target", "Verdict",
]
