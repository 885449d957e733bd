# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vacate.volume.apply: the approved plan carried out on its host, step by step through the
act module, journaled here beside the plan."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket

from ansible_collections.vacate.volume.plugins.module_utils.vacate_ops import BOUNDS
from ansible_collections.vacate.volume.plugins.plugin_utils.vacate_reach import (
    VacateAction, reach, vacate_module)

SPEC = dict(plan=dict(type="path", required=True),
            plan_sha256=dict(type="str", required=True),
            **BOUNDS)


class ActionModule(VacateAction):
    _VALID_ARGS = frozenset(SPEC)
    SPEC = SPEC

    def work(self, args, task_vars):
        plan_path = os.path.abspath(args["plan"])
        # the apply's name on the host: this controller's journal of the plan
        token = "%s:%s" % (socket.gethostname(), plan_path)
        host = reach(self, task_vars, acting=(args["plan_sha256"].strip().lower(), token))
        return vacate_module("flow.playbook").apply(
            host, plan_path, args["plan_sha256"], check_mode=self._task.check_mode,
            diff=self._task.diff)
