# -*- coding: utf-8 -*-
# Copyright: vacate's authors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The observing layer on the target, inside the module Ansible sent.

``vacate_payload`` (written by ``vacate collection`` at build time, never committed) holds
the zip ``vacate payload`` ships, byte for byte (``vacate_payload_act``: with the acting
half, as ``vacate apply --host`` sends it); each module passes the one it imports, and it is
imported from memory here by the finder of vacate's ssh bootstrap, built into the same file
(first on ``sys.meta_path``: nothing is written to disk, and an installed vacate there is
never the one run). :func:`answer` runs one of the layer's read-only
operations (``vacate.observing.ops.OPS``) and gives its reply as JSON values, or the error.

Each runs in a worker forked for it (``vacate.observing.bounded``), which this process waits
for no longer than ``deadline`` seconds in all (None: no bound but the silence) nor
``stall_timeout`` seconds without its heartbeat; past either, the worker and everything it
started are killed and the reply is the error naming the bound and what it was doing.
Standard library only, CPython 3.8+.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import sys

# a run's bounds on the target, as the modules and the action plugins take them (30 is
# vacate.observing.worker.STALL_S, --stall-timeout's default; documented by the doc
# fragment vacate.volume.attributes)
BOUNDS = dict(deadline=dict(type="float"), stall_timeout=dict(type="float", default=30.0))


def _load(payload):
    """``payload`` (a generated module: ``PAYLOAD``, the zip, and ``Payload``, the bootstrap's
    finder) first on ``sys.meta_path``, once; a ``vacate`` imported before is forgotten."""
    for finder in sys.meta_path:
        if isinstance(finder, payload.Payload):
            return
    for name in [m for m in sys.modules if m == "vacate" or m.startswith("vacate.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, payload.Payload(base64.b64decode("".join(payload.PAYLOAD))))


def _bounded(op, work, bounds):
    """``work(host)`` in a worker forked for it, within ``bounds`` (``deadline``,
    ``stall_timeout``: :func:`vacate.observing.bounded.run`)."""
    from vacate.observing import bounded
    from vacate.observing.host import Host
    from vacate.observing.worker import STALL_S

    return bounded.run(lambda: work(Host.local()), op, deadline_s=bounds.get("deadline"),
                       stall_s=bounds.get("stall_timeout") or STALL_S)


def act(payload, op, args, sha256, token, **bounds):
    """One operation of an apply's far side (``vacate.act.far.OPS``) in this short process:
    the apply begun (``apply_begin``) or resumed (its lock and lease taken again, its plan
    read back: ``far.resume``) first. The worker that holds the lock is the one a deadline
    kills: the lock goes with it."""
    _load(payload)
    from vacate.act import far
    from vacate.observing import worker

    def work(host):
        given = args
        if op == "apply_begin":
            given = dict(args, token=token)
        elif op in far.OPS:
            far.resume(host, sha256, token)
        return worker.answer(host, {"op": op, "args": given}, ops=far.OPS)
    return _bounded(op, work, bounds)


def answer(payload, op, args, **bounds):
    """``{"ok": value}``, or ``{"error": {...}}`` as vacate's far worker says it."""
    _load(payload)
    from vacate.observing import worker

    def work(host):
        if op == "entries_whole":
            return {"ok": _entries_whole(host, **args)}
        return worker.answer(host, {"op": op, "args": args})
    return _bounded(op, work, bounds)


def _entries_whole(host, path, dev):
    """An item's entries file recorded, and its bytes (base64) in the same reply: the
    module's process ends with its reply, so nothing is kept for a later call."""
    from vacate.observing.ops import OPS

    got = OPS["entries_file"](host, path=path, dev=dev)
    pieces = []
    offset = 0
    while True:
        piece = OPS["entries_piece"](host, name=got["name"], offset=offset)
        pieces.append(piece)
        offset += len(base64.b64decode(piece))
        if offset >= int(got["size"]) or not piece:
            break
    got["data"] = pieces
    return got
