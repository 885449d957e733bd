# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vacate.volume.check: observe on the target (the observe module), decide here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase
from ansible_collections.vacate.volume.plugins.plugin_utils.vacate_reach import (
    reach, vacate_module)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "scan_tree", "configured", "ct"))
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=dict(
            path=dict(type="path", required=True), scan_tree=dict(type="bool", default=True),
            configured=dict(type="bool", default=True), ct=dict(type="str")))
        playbook = vacate_module("flow.playbook")
        where = reach(self, task_vars, ct=args["ct"])
        result.update(playbook.check(where.label, where, args["path"],
                                     scan_tree=args["scan_tree"],
                                     configured=args["configured"]))
        return result
