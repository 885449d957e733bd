# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vacate.volume.check: observe on the target (the observe module), decide here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.vacate.volume.plugins.module_utils.vacate_ops import BOUNDS
from ansible_collections.vacate.volume.plugins.plugin_utils.vacate_reach import (
    VacateAction, reach, vacate_module)

SPEC = dict(path=dict(type="path", required=True), scan_tree=dict(type="bool", default=True),
            configured=dict(type="bool", default=True), ct=dict(type="str"),
            **BOUNDS)


class ActionModule(VacateAction):
    _VALID_ARGS = frozenset(SPEC)
    SPEC = SPEC

    def work(self, args, task_vars):
        host = reach(self, task_vars, ct=args["ct"])
        return vacate_module("flow.playbook").check(
            host.label, host, args["path"], scan_tree=args["scan_tree"],
            configured=args["configured"])
