# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vacate.volume.plan: look at the target through the op module, plan and write here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.vacate.volume.plugins.module_utils.vacate_ops import BOUNDS
from ansible_collections.vacate.volume.plugins.plugin_utils.vacate_reach import (
    VacateAction, reach, vacate_module)

SPEC = dict(
    path=dict(type="path", required=True), dest=dict(type="path", required=True),
    keep=dict(type="list", elements="str", default=[]),
    archive=dict(type="list", elements="str", default=[]),
    delete=dict(type="list", elements="str", default=[]),
    migrate=dict(type="raw"), archive_to=dict(type="str"),
    grace=dict(type="float", default=10.0), no_snapshot=dict(type="bool", default=False),
    mask_references=dict(type="bool", default=False),
    free_volume=dict(type="bool", default=False),
    archive_format=dict(type="str", default="tar", choices=["tar", "zfs", "both"]),
    verify_pool=dict(type="str"), ct=dict(type="str"), **BOUNDS)


class ActionModule(VacateAction):
    _VALID_ARGS = frozenset(SPEC)
    SPEC = SPEC

    def work(self, args, task_vars):
        host = reach(self, task_vars, ct=args.pop("ct"))
        path, dest = args.pop("path"), args.pop("dest")
        return vacate_module("flow.playbook").plan(host, path, dest,
                                                   check_mode=self._task.check_mode, **args)
