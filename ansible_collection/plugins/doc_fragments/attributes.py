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
