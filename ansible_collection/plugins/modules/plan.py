#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: plan
short_description: Plan the retirement of a volume, one plan file per host on the controller
version_added: "0.1.0"
description:
  - C(vacate plan PATH -o DEST) for each host, the host looked at through Ansible's module
    transport (M(vacate.volume.op); read-only there) and the plan decided and written on the
    controller at O(dest), for a person to review before it is applied.
  - Every option of C(vacate plan) is an option here.
  - C(changed) is true where the file at O(dest) is new or differs. In check mode nothing is
    written; the result says what the plan would be.
options:
  path:
    description: The volume's mount point on the target (a plan retires a whole volume).
    type: path
    required: true
  dest:
    description: The plan file on the controller, per host (templated, e.g.
      C(plans/{{ inventory_hostname }}.plan)). Entries files of items to delete are kept
      beside it.
    type: path
    required: true
  keep:
    description: Items to keep (relative to O(path) or absolute under it; globs allowed; the
      deepest match wins).
    type: list
    elements: str
    default: []
  archive:
    description: Items to archive (to O(archive_to)).
    type: list
    elements: str
    default: []
  delete:
    description: Items to delete.
    type: list
    elements: str
    default: []
  migrate:
    description: Items to copy to another volume and repoint what uses them, each C(P=DEST)
      (or a mapping of P to DEST), as C(vacate plan --migrate).
    type: raw
  archive_to:
    description: Where archived items go (a directory, not on the volume, or
      C(s3://bucket/prefix)).
    type: str
  grace:
    description: Seconds between TERM and KILL when ending a holder.
    type: float
    default: 10.0
  no_snapshot:
    description: No snapshot before deleting on ZFS or btrfs.
    type: bool
    default: false
  mask_references:
    description: Mask the units that still name archived or deleted paths.
    type: bool
    default: false
  archive_format:
    description: How the volume is archived, as C(vacate plan --archive-format) -
      C(tar) (each archived item a tar archive, files restored anywhere), C(zfs) (the
      volume's ZFS dataset itself, sent with C(zfs send) into zstd parts in O(archive_to),
      restored with C(zfs receive) on any ZFS) or C(both).
    type: str
    default: tar
    choices: [tar, zfs, both]
  verify_pool:
    description: With O(archive_format) C(zfs) or C(both), the pool whose scratch dataset
      the dataset's archive is received into to prove it receivable (C(--verify-pool));
      without it the stream is only parsed, the weaker check.
    type: str
  free_volume:
    description: Free the volume itself as the plan's last step, as C(vacate plan
      --free-volume) (its ZFS dataset destroyed with C(zfs destroy -r)), once every archive
      of it is verified in the apply. The plan is blocked while an item is kept outside an
      archive, while the dataset's archive is only parsed (no C(--verify-pool)), or while a
      snapshot is held or cloned or the dataset has children; refused on a volume that is
      not a ZFS dataset.
    type: bool
    default: false
  ct:
    description: On a Proxmox host, O(path) as container O(ct) sees it.
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
seealso:
  - module: vacate.volume.check
extends_documentation_fragment:
  - vacate.volume.attributes
  - vacate.volume.attributes.controller
  - vacate.volume.attributes.deadline
"""

EXAMPLES = r"""
- name: One plan per host, to review
  vacate.volume.plan:
    path: /srv/data
    dest: "plans/{{ inventory_hostname }}.plan"
    archive_to: /backup/{{ inventory_hostname }}
    delete:
      - cache
    keep:
      - models/current
  register: planned
"""

RETURN = r"""
dest:
  description: The plan file on the controller (absolute).
  returned: success
  type: str
plan_sha256:
  description: The sha256 of the plan file, to give the apply once the plan is approved.
  returned: success
  type: str
machine_id:
  description: The machine-id of the host the plan was made for.
  returned: success
  type: str
blocked:
  description: Why the plan cannot be applied as it stands (empty when it can).
  returned: success
  type: list
  elements: str
items:
  description: Each item of the volume and what the plan does with it (C(path), C(action)).
  returned: success
  type: list
  elements: dict
steps:
  description: The ordered teardown (C(id), C(kind), C(summary) of each step).
  returned: success
  type: list
  elements: dict
"""
