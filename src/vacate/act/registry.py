"""Every kind of step apply knows: the modules that act them, one line each. A kind is
declared in its module's ``KINDS`` (see :mod:`vacate.act.kind`)."""

from __future__ import annotations

import importlib

MODULES = tuple(importlib.import_module(f"vacate.act.{name}") for name in (
    "archive_step",
    "check_step",
    "config_edit",
    "dataset_step",
    "containers",
    "delete_step",
    "destroy_step",
    "gpu",
    "kernel",
    "lockdir",
    "manual",
    "migrate",
    "processes",
    "pve_free",
    "pve_set",
    "relink",
    "units",
))

KINDS = {k.name: (k, m) for m in MODULES for k in m.KINDS}
