# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vacate.volume.plan: look at the target through the op module, plan and write here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.vacate.volume.plugins.plugin_utils.vacate_reach import (
    reach, vacate_module)

SPEC = dict(
    path=dict(type="path", required=True), dest=dict(type="path", required=True),
    keep=dict(type="list", elements="str", default=[]),
    archive=dict(type="list", elements="str", default=[]),
    delete=dict(type="list", elements="str", default=[]),
    migrate=dict(type="raw"), archive_to=dict(type="str"),
    grace=dict(type="float", default=10.0), no_snapshot=dict(type="bool", default=False),
    mask_references=dict(type="bool", default=False), ct=dict(type="str"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(SPEC)
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=SPEC)
        playbook = vacate_module("flow.playbook")
        errors = vacate_module("observing.errors")
        where = reach(self, task_vars, ct=args.pop("ct"))
        path, dest = args.pop("path"), args.pop("dest")
        try:
            result.update(playbook.plan(where, path, dest, check_mode=self._task.check_mode,
                                        **args))
        except errors.VacateError as e:
            raise AnsibleActionFail(e.message + ("" if not e.hint else " (%s)" % e.hint))
        return result
