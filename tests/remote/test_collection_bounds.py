"""The collection's bounds of a run on the target say vacate's own defaults: the
``stall_timeout`` its action plugins pass and the modules' argument specs (one ``BOUNDS``, in
``module_utils/vacate_ops.py``) and their documentation all default to ``--stall-timeout``'s
(:data:`vacate.observing.worker.STALL_S`)."""

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
    assert defaults(os.path.join(PLUGINS, "module_utils", "vacate_ops.py")) == [STALL_S]
    actions = [f"action/{n}" for n in ("apply.py", "check.py", "observe.py", "plan.py")]
    for name in ("modules/op.py", "modules/act.py", "modules/observe.py", *actions):
        with open(os.path.join(PLUGINS, *name.split("/")), encoding="utf-8") as f:
            text = f.read()
        assert "vacate_ops import BOUNDS" in text and defaults(os.path.join(
            PLUGINS, *name.split("/"))) == [], name     # the one BOUNDS, no other default
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("fragment", os.path.join(PLUGINS, "doc_fragments",
                                                            "attributes.py"))
    fragment = module_from_spec(spec)
    spec.loader.exec_module(fragment)
    for text in (fragment.ModuleDocFragment.BOUNDS, fragment.ModuleDocFragment.DEADLINE):
        assert yaml.safe_load(text)["options"]["stall_timeout"]["default"] == STALL_S
