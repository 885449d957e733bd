#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apply
short_description: Carry out an approved vacate plan on its host
version_added: "0.1.0"
description:
  - C(vacate apply PLAN) for the plan O(plan) (on the controller, as M(vacate.volume.plan)
    wrote it), carried out on the task's host through Ansible's own connection (its become,
    interpreter and connection settings), one step at a time by the M(vacate.volume.act)
    module, which holds vacate's acting half. The journal stays on the controller, beside
    the plan; a rerun after a failure resumes where it stopped, as C(vacate apply) does.
  - A plan changed since it was approved (its sha256 is not O(plan_sha256)) is refused, and
    so is a plan made for another machine (its machine-id) or one gone stale, before anything
    changes.
  - Of two applies of one plan on one host at once, the second is refused (a lock and a
    lease under C(/run/vacate) there). A connection that drops fails the step in progress;
    a rerun asks the host whether that step is done and goes on.
  - In check mode, the dry run (each step's precondition checked, nothing changed). With
    C(--diff), the steps and their status.
options:
  plan:
    description: The plan file on the controller.
    type: path
    required: true
  plan_sha256:
    description: The sha256 of the plan file as approved (M(vacate.volume.plan) returns it).
    type: str
    required: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
requirements:
  - Root on the target (C(become) where the connection's user is not root).
seealso:
  - module: vacate.volume.plan
extends_documentation_fragment:
  - vacate.volume.attributes
  - vacate.volume.attributes.controller
  - vacate.volume.attributes.deadline
"""

EXAMPLES = r"""
- name: Apply the approved plan, one host at a time
  vacate.volume.apply:
    plan: "plans/{{ inventory_hostname }}.plan"
    plan_sha256: "{{ approved[inventory_hostname] }}"
  become: true
"""

RETURN = r"""
steps:
  description: Each step of the plan with its C(status) (ok, skipped, failed, manual, or
    pending where an earlier step failed), C(detail), and C(earlier) (done by an earlier run).
  returned: always
  type: list
  elements: dict
journal:
  description: The journal on the controller (beside the plan); null in check mode.
  returned: always
  type: str
complete:
  description: Every step is done.
  returned: always
  type: bool
manual:
  description: The steps left to a person (their ids).
  returned: always
  type: list
  elements: str
"""
