# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every module of the collection says of its attributes and needs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # every module: the target's side
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying
      target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in
      check_mode), when in diff mode.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
requirements:
  - Python 3.8 or newer on the target (standard library only; nothing is installed there).
author:
  - vacate's authors (@vacate)
"""

    # the modules an action plugin runs on the controller, where vacate decides
    CONTROLLER = r"""
options: {}
attributes:
  action:
    description: Runs as an action plugin on the controller (where vacate decides), the work
      on the target done by a module.
    support: full
requirements:
  - vacate installed on the controller (in the Python Ansible runs on).
"""

    # the internal modules (op, act): the bounds of one run on the target
    BOUNDS = r"""
options:
  deadline:
    description: The longest this run may take on the target, in seconds (the action
      plugins pass their O(deadline), or what is left of the task's C(timeout)); past it the
      worker and every process it started are killed, and the reply is the error naming the
      deadline and what the worker was doing. Not given, no bound but O(stall_timeout).
    type: float
  stall_timeout:
    description: The longest the worker may go without its heartbeat (one every 2 s while it
      works), in seconds; a stopped worker, or one stuck in the kernel on a filesystem that
      does not answer, is ended then, as past O(deadline).
    type: float
    default: 30
"""

    # the modules a play uses (check, observe, plan, apply): vacate's own deadline there
    DEADLINE = r"""
options:
  deadline:
    description:
      - The longest one run of vacate on the target may take, in seconds (the observation
        of check and observe, each look of plan, each step of apply). Past it the module
        there kills its worker and every process that started (nothing is left running, an
        apply's lock is let go) and the task fails naming the host, the deadline and what
        vacate was doing; a step of an apply cut so is a failed step, which a rerun resumes.
      - Where the task sets C(timeout), each run also ends a few seconds before what is left
        of it, so that vacate's own message, not Ansible's, says what happened.
      - Not given (and no C(timeout)), no bound but O(stall_timeout).
    type: float
  stall_timeout:
    description: The longest vacate's worker on the target may go without its heartbeat
      (one every 2 s while it works), in seconds, as C(--stall-timeout) over vacate's own
      ssh; a worker stopped, or stuck in the kernel on a filesystem that does not answer, is
      ended then, and the task fails as past O(deadline).
    type: float
    default: 30
"""
