# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vacate.volume.apply: the approved plan carried out on its host, step by step through the
act module, journaled here beside the plan."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.vacate.volume.plugins.plugin_utils.vacate_reach import (
    reach, vacate_module)

SPEC = dict(plan=dict(type="path", required=True),
            plan_sha256=dict(type="str", required=True))


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
        plan_path = os.path.abspath(args["plan"])
        # the apply's name on the host: this controller's journal of the plan
        token = "%s:%s" % (socket.gethostname(), plan_path)
        where = reach(self, task_vars, acting=(args["plan_sha256"].strip().lower(), token))
        try:
            result.update(playbook.apply(where, plan_path, args["plan_sha256"],
                                         check_mode=self._task.check_mode,
                                         diff=self._task.diff))
        except errors.VacateError as e:
            raise AnsibleActionFail(e.message + ("" if not e.hint else " (%s)" % e.hint))
        return result
