# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vacate.volume.observe: the observe module on the target; a large observation written on
the controller instead of into the result."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.vacate.volume.plugins.module_utils.vacate_ops import BOUNDS
from ansible_collections.vacate.volume.plugins.plugin_utils.vacate_reach import (
    OBSERVE_MODULE, VacateAction, vacate_module)

SPEC = dict(path=dict(type="path", required=True), scan_tree=dict(type="bool", default=True),
            configured=dict(type="bool", default=True), ct=dict(type="str"),
            dest=dict(type="path"), max_result_bytes=dict(type="int", default=1048576),
            **BOUNDS)


class ActionModule(VacateAction):
    _VALID_ARGS = frozenset(SPEC)
    SPEC = SPEC

    def work(self, args, task_vars):
        res = self._execute_module(module_name=OBSERVE_MODULE, module_args=dict(
            path=args["path"], scan_tree=args["scan_tree"], configured=args["configured"],
            ct=args["ct"], **self.bounds()), task_vars=task_vars)
        if res.get("failed") or "observation" not in res:
            # vacate's message names what it was doing (and the deadline, where it passed);
            # the host is named here, as the other modules' messages name it
            if isinstance(res.get("error"), dict) and res.get("msg"):
                res["msg"] = "%s: %s" % (task_vars.get("inventory_hostname") or "?", res["msg"])
            return res
        dest = args["dest"]
        if dest is None:
            dest = os.path.join(task_vars.get("playbook_dir") or ".", "vacate-observations",
                                "%s.json" % task_vars.get("inventory_hostname", "host"))
        return vacate_module("flow.playbook").observed(
            res["observation"], dest, args["max_result_bytes"], write=args["dest"] is not None)
