#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: observe
short_description: Look at what uses a volume on the target, read-only
version_added: "0.1.0"
description:
  - Runs vacate's observing layer on the target through Ansible's own module transport
    (Python 3.8+ and its standard library there; nothing is installed) and returns the
    observation of O(path) (a C(vacate.observation/1) document), as C(vacate observe) writes it.
  - Nothing on the target is changed; the module runs in check mode as it does otherwise.
  - An observation larger than O(max_result_bytes) is written to O(dest) on the controller
    and the result holds its summary and the file's name instead.
  - The observation is decided on the controller by M(vacate.volume.check); use this module
    to keep observations (C(vacate check --from FILE) decides one later).
options:
  path:
    description: The volume, mount point or directory to look at, on the target.
    type: path
    required: true
  scan_tree:
    description: Walk the tree under O(path) (sizes, what the items are); V(false) looks at
      the users only.
    type: bool
    default: true
  configured:
    description: Read configuration (units, fstab, exports, container configs) for users that
      are not running now.
    type: bool
    default: true
  ct:
    description: On a Proxmox host, O(path) as container O(ct) sees it.
    type: str
  dest:
    description:
      - Where on the controller the observation is written (JSON). Written whenever given;
        when not given, a large observation goes to
        C(vacate-observations/<inventory_hostname>.json) beside the playbook.
    type: path
  max_result_bytes:
    description: The most the result holds of the observation (its JSON); a larger one is
      only in O(dest).
    type: int
    default: 1048576
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - vacate.volume.attributes
  - vacate.volume.attributes.controller
  - vacate.volume.attributes.deadline
"""

EXAMPLES = r"""
- name: Keep each host's observation of /srv/data
  vacate.volume.observe:
    path: /srv/data
    dest: "observations/{{ inventory_hostname }}.json"
  register: seen

- name: Only who uses it, no walk
  vacate.volume.observe:
    path: /srv/data
    scan_tree: false
"""

RETURN = r"""
observation:
  description: The observation (C(vacate.observation/1)); null when it was larger than
    O(max_result_bytes) (then it is in RV(observation_file)).
  returned: success
  type: dict
observation_file:
  description: The file on the controller the observation was written to, if it was.
  returned: success
  type: str
  sample: observations/web1.json
size_bytes:
  description: The size of the observation's JSON.
  returned: success
  type: int
summary:
  description: What the observation says in short (target, consumers, problems), whether or
    not it is in the result.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vacate.volume.plugins.module_utils.vacate_ops import BOUNDS, answer
from ansible_collections.vacate.volume.plugins.module_utils import vacate_payload


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            scan_tree=dict(type="bool", default=True),
            configured=dict(type="bool", default=True),
            ct=dict(type="str"),
            dest=dict(type="path"),
            max_result_bytes=dict(type="int", default=1048576),
            **BOUNDS),
        supports_check_mode=True,
    )
    p = module.params
    args = dict(path=p["path"], scan_tree=p["scan_tree"], configured=p["configured"],
                ct=p["ct"])
    reply = answer(vacate_payload, "observe", args, deadline=p["deadline"],
                   stall_timeout=p["stall_timeout"])
    if "error" in reply:
        module.fail_json(msg=reply["error"].get("message") or "vacate could not look",
                         error=reply["error"])
    module.exit_json(changed=False, observation=reply["ok"])


if __name__ == "__main__":
    main()
