"""The collection's bounds of a run on the target say vacate's own defaults: the
``stall_timeout`` its action plugins pass, the modules' argument specs and their documentation
all default to ``--stall-timeout``'s (:data:`vacate.observing.worker.STALL_S`)."""

from __future__ import annotations

import ast
import os

import yaml
from harness.collection import SRC

from vacate.observing.worker import STALL_S

PLUGINS = os.path.join(os.path.dirname(SRC), "ansible_collection", "plugins")


def defaults(path: str) -> list:
    """Every ``stall_timeout=dict(..., default=X)`` in the file: its X."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.keyword)
            and node.arg == "stall_timeout" and isinstance(node.value, ast.Call)
            for kw in node.value.keywords if kw.arg == "default"]


def test_every_stall_timeout_default_is_stall_s():
    found = {name: defaults(os.path.join(PLUGINS, *name.split("/"))) for name in (
        "plugin_utils/vacate_reach.py", "modules/op.py", "modules/act.py", "modules/observe.py")}
    assert all(v == [STALL_S] for v in found.values()), found
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("fragment", os.path.join(PLUGINS, "doc_fragments",
                                                            "attributes.py"))
    fragment = module_from_spec(spec)
    spec.loader.exec_module(fragment)
    for text in (fragment.ModuleDocFragment.BOUNDS, fragment.ModuleDocFragment.DEADLINE):
        assert yaml.safe_load(text)["options"]["stall_timeout"]["default"] == STALL_S
