#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: check
short_description: Is anything still using a volume? The verdict for each host
version_added: "0.1.0"
description:
  - Looks at O(path) on the target (vacate's observing layer, sent as module code through
    Ansible's own transport; Python 3.8+ there, nothing installed) and decides on the
    controller with the installed vacate, as C(vacate check --inventory) does for hosts
    reached over ssh, with the same verdict, blockers, next actions and consumers.
  - C(changed) is always false. The task fails only where vacate could not look (the path is
    missing, the filesystem does not answer); a host whose volume is in use is data, not a
    failure, so that a play decides (C(failed_when) on RV(safe_to_unmount)).
  - A host Ansible cannot reach is reported by Ansible as unreachable.
options:
  path:
    description: The volume, mount point or directory to check, on the target.
    type: path
    required: true
  scan_tree:
    description: Walk the tree under O(path) (what is there, how large); V(false) looks at
      the users only (faster).
    type: bool
    default: true
  configured:
    description: Read configuration (units, fstab, exports, crontabs, container configs)
      for users that are not running now.
    type: bool
    default: true
  ct:
    description: On a Proxmox host, O(path) as container O(ct) sees it.
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
seealso:
  - module: vacate.volume.plan
  - module: vacate.volume.observe
extends_documentation_fragment:
  - vacate.volume.attributes
  - vacate.volume.attributes.controller
  - vacate.volume.attributes.deadline
"""

EXAMPLES = r"""
- name: Is /srv/data still used?
  vacate.volume.check:
    path: /srv/data
  register: usage
  failed_when: not usage.safe_to_unmount

- name: What would end its use
  ansible.builtin.debug:
    var: usage.next_actions
  when: usage.safe_to_unmount is false
"""

RETURN = r"""
safe_to_unmount:
  description: True nothing uses the volume; false something does (RV(blockers)); null
    vacate could not tell (the C(unknowns) of RV(verdict) say why).
  returned: always
  type: bool
blockers:
  description: What uses it, each with the reason and its next actions (as values,
    C(actions), and as the line a person reads, C(action)).
  returned: always
  type: list
  elements: dict
next_actions:
  description: For each blocker, the line saying what would end its use.
  returned: always
  type: list
  elements: str
verdict:
  description: The verdict as C(vacate check --json) gives it (C(safe_to_unmount),
    C(blockers), C(unknowns)).
  returned: always
  type: dict
consumers:
  description: Everything that uses the volume, with its evidence.
  returned: always
  type: list
  elements: dict
items:
  description: What is on the volume, each with its status and users.
  returned: always
  type: list
  elements: dict
target:
  description: The mount holding O(path).
  returned: always
  type: dict
host:
  description: The host as it was looked at (its name, machine-id, how it was reached).
  returned: always
  type: dict
problems:
  description: What vacate met while looking (the warnings of C(vacate check --json)).
  returned: always
  type: list
  elements: dict
schema:
  description: The document's schema, C(vacate.check/1).
  returned: always
  type: str
inventory_hostname:
  description: The host's name in the inventory.
  returned: always
  type: str
error:
  description: Why vacate could not look (C(kind), C(message), C(hint)), when it could not.
  returned: failure
  type: dict
"""
