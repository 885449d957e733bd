#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: act
short_description: One operation of an apply's far side (internal)
version_added: "0.1.0"
description:
  - What M(vacate.volume.apply) asks the target through Ansible's module transport, one
    operation a call (begin the apply, whether a step is done, carry a step out), with vacate's
    acting half (the same modules C(vacate apply --host) sends). The plan, its lock and its
    lease are kept on the target between calls (C(/var/tmp/vacate), C(/run/vacate)); the
    journal stays on the controller. Not meant to be used in a play directly.
options:
  op:
    description: The operation's name (C(vacate.act.far.OPS)).
    type: str
    required: true
  args:
    description: Its arguments.
    type: dict
    default: {}
  sha256:
    description: The sha256 of the approved plan.
    type: str
    required: true
  token:
    description: Names the apply (one controller's journal of the plan); another apply of the
      same plan is refused while this one holds it.
    type: str
    required: true
attributes:
  check_mode:
    support: full
    details: In check mode the operations that carry a step out are refused; the dry run
      asks only whether each step is ready.
  diff_mode:
    support: none
extends_documentation_fragment:
  - vacate.volume.attributes
  - vacate.volume.attributes.bounds
"""

EXAMPLES = r"""
# internal: vacate.volume.apply runs it
- name: Whether step 3 of an approved plan is done
  vacate.volume.act:
    op: apply_done
    args:
      step: s3
    sha256: "{{ plan_sha256 }}"
    token: "controller:/srv/plans/web1.plan"
"""

RETURN = r"""
reply:
  description: The operation's value as JSON, or its error (C(error) with C(kind),
    C(message), C(hint)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vacate.volume.plugins.module_utils.vacate_ops import BOUNDS, act
from ansible_collections.vacate.volume.plugins.module_utils import vacate_payload_act


# what changes the host beyond the apply's own plan, lock and lease
ACTING = ("apply_step", "apply_bring_back")


def main():
    module = AnsibleModule(
        argument_spec=dict(op=dict(type="str", required=True),
                           args=dict(type="dict", default={}),
                           sha256=dict(type="str", required=True),
                           token=dict(type="str", required=True, no_log=False),
                           **BOUNDS),
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode and p["op"] in ACTING:
        module.fail_json(msg="%s changes the host: not in check mode (the dry run asks "
                             "apply_ready)" % p["op"])
    reply = act(vacate_payload_act, p["op"], p["args"], p["sha256"], p["token"],
                deadline=p["deadline"], stall_timeout=p["stall_timeout"])
    module.exit_json(changed=False, reply=reply)


if __name__ == "__main__":
    main()
