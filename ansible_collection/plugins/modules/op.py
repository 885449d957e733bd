#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: op
short_description: One read-only operation of vacate's observing layer (internal)
version_added: "0.1.0"
description:
  - What M(vacate.volume.plan) asks the target through Ansible's module transport, one
    operation a call (the mount holding a path, free space, an item's entries file). It reads
    and never changes the target. Not meant to be used in a play directly.
options:
  op:
    description: The operation's name (C(vacate.observing.ops.OPS), or C(entries_whole)).
    type: str
    required: true
  args:
    description: Its arguments.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
extends_documentation_fragment:
  - vacate.volume.attributes
  - vacate.volume.attributes.bounds
"""

EXAMPLES = r"""
- name: The mount holding /srv/data
  vacate.volume.op:
    op: target
    args:
      path: /srv/data
"""

RETURN = r"""
reply:
  description: The operation's value as JSON, or its error (C(error) with C(kind),
    C(message), C(hint)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vacate.volume.plugins.module_utils.vacate_ops import BOUNDS, answer
from ansible_collections.vacate.volume.plugins.module_utils import vacate_payload


def main():
    module = AnsibleModule(
        argument_spec=dict(op=dict(type="str", required=True),
                           args=dict(type="dict", default={}),
                           **BOUNDS),
        supports_check_mode=True,
    )
    p = module.params
    reply = answer(vacate_payload, p["op"], p["args"], deadline=p["deadline"],
                   stall_timeout=p["stall_timeout"])
    module.exit_json(changed=False, reply=reply)


if __name__ == "__main__":
    main()
