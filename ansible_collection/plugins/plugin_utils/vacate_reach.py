# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection's action plugins share: the installed vacate (imported on the
controller, with a message saying how to install it where it is missing) and a reach that
runs vacate's operations on the target through the ``vacate.volume.op`` module
(``vacate.remote.modules.ModuleReach``), each run bounded there by the task's ``deadline``
and ``stall_timeout`` (:meth:`VacateAction.bounds`)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase

OP_MODULE = "vacate.volume.op"
OBSERVE_MODULE = "vacate.volume.observe"
ACT_MODULE = "vacate.volume.act"
TIMEOUT_MARGIN_S = 5.0      # a run ends this long before the task's timeout (a quarter at most)


def vacate_module(name):
    """``vacate.<name>`` of the controller's vacate; a task failure where it is missing."""
    import importlib

    try:
        return importlib.import_module("vacate." + name)
    except ImportError as e:
        raise AnsibleActionFail(
            "vacate.volume needs vacate installed on the controller, in the Python Ansible "
            "runs on (pip install vacate): %s" % e)


def reach(action, task_vars, ct=None, acting=None):
    """A ``ModuleReach`` for the task's host: each operation one run of the op module
    (the observation: one run of the observe module; with ``acting``, the plan's sha256
    and the apply's token, an apply's operation one run of the act module)."""
    modules = vacate_module("remote.modules")
    name = task_vars.get("inventory_hostname") or "?"

    def run(op, args):
        if op == "observe":
            res = action._execute_module(module_name=OBSERVE_MODULE, module_args=dict(
                path=args["path"], scan_tree=args.get("scan_tree", True),
                configured=args.get("configured", True), ct=args.get("ct"),
                **action.bounds()), task_vars=task_vars)
            if res.get("failed") and isinstance(res.get("error"), dict):
                return {"error": res["error"]}
            reply_ok = "observation" in res and not res.get("failed")
        elif op.startswith("apply_") and acting is not None:
            # a connection that drops during an apply fails the step in progress (its
            # outcome there not known: a rerun asks whether it is done), as over vacate's ssh
            try:
                res = action._execute_module(module_name=ACT_MODULE, module_args=dict(
                    op=op, args=args, sha256=acting[0], token=acting[1],
                    **action.bounds()), task_vars=task_vars)
            except AnsibleConnectionFailure as e:
                return {"error": {"kind": "connection", "message": "the connection dropped "
                                  "(%s)" % str(e).strip().splitlines()[0]}}
            if not isinstance(res.get("reply"), dict) or res.get("failed"):
                return {"error": {"kind": "connection", "message": "no answer from the act "
                                  "module (rc %s: %s)" % (res.get("rc"), res.get("msg"))}}
            return res["reply"]
        else:
            res = action._execute_module(module_name=OP_MODULE, module_args=dict(
                op=op, args=args, **action.bounds()), task_vars=task_vars)
            reply_ok = isinstance(res.get("reply"), dict) and not res.get("failed")
        if not reply_ok:
            raise AnsibleActionFail("%s: the %s module failed: %s"
                                    % (name, op, res.get("msg") or res.get("module_stderr")
                                       or res), result=res)
        return {"ok": res["observation"]} if op == "observe" else res["reply"]
    return modules.ModuleReach(name, run, ct=ct)


class VacateAction(ActionBase):
    """An action plugin of the collection: its arguments checked against ``SPEC`` (which
    holds ``vacate_ops.BOUNDS``, taken out here), then :meth:`work` (``args``, ``task_vars``) gives
    the result; vacate's refusals (``VacateError``) fail the task with their message and
    hint."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    SPEC = {}

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        self._began = time.monotonic()
        result = super(VacateAction, self).run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=self.SPEC)
        self._deadline, self._stall = args.pop("deadline"), args.pop("stall_timeout")
        for name, value in (("deadline", self._deadline), ("stall_timeout", self._stall)):
            if value is not None and not value > 0:
                raise AnsibleActionFail("%s must be more than 0 (seconds)" % name)
        errors = vacate_module("observing.errors")
        try:
            result.update(self.work(args, task_vars))
        except errors.VacateError as e:
            raise AnsibleActionFail(e.message + ("" if not e.hint else " (%s)" % e.hint))
        return result

    def bounds(self):
        """The bounds of the next run on the target (the target module's ``deadline`` and
        ``stall_timeout``): the task's ``deadline``, and no later than a few seconds before its
        ``timeout`` runs out (so vacate ends the run there, and says why, before Ansible
        gives up on the task)."""
        deadline = self._deadline
        timeout = getattr(self._task, "timeout", None) or 0
        if timeout > 0:
            left = timeout - (time.monotonic() - self._began) \
                - min(TIMEOUT_MARGIN_S, timeout / 4.0)
            deadline = round(max(1.0, left if deadline is None else min(deadline, left)), 1)
        return dict(deadline=deadline, stall_timeout=self._stall)

    def work(self, args, task_vars):
        raise NotImplementedError
