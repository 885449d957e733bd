"""The observing layer on a host through Ansible's module transport: what the
``vacate.volume`` collection's action plugins reach a host with. The same interface as
:class:`~vacate.remote.Remote` (``call(op)``, ``observe()``, ``write_entries()``, ``label``,
``ct``), so the flows take it and never ask which.

Each call is one run of the collection's ``vacate.volume.op`` module on the target (its
``module_utils`` hold the zip ``vacate payload`` ships): ``run(op, args)`` is given by the
action plugin and returns the module's reply, ``{"ok": value}`` or ``{"error": {...}}`` as
vacate's far worker says it. A host Ansible cannot reach raises Ansible's own error out of
``run``: it is Ansible's to report, as unreachable."""

from __future__ import annotations

from dataclasses import replace

from vacate.remote import DECODE, keep_entries
from vacate.remote.ssh import error_from


class ModuleReach:
    """One host as Ansible reaches it: ``label`` names it in messages (its
    ``inventory_hostname``), ``run(op, args)`` runs an operation there."""

    def __init__(self, label: str, run, *, ct: str | None = None):
        self.label = label + ("" if ct is None else f", CT {ct}")
        self.run = run
        self.ct = ct

    def call(self, op: str, on_note=None, **args):
        reply = self.run(op, args)
        if "error" in reply:
            raise error_from(self.label, reply["error"])
        decode = DECODE.get(op)
        return decode(reply["ok"]) if decode else reply["ok"]

    def observe(self, path: str, progress=None, **kw):
        """The observation of ``path`` (its host named as Ansible reached it)."""
        obs = self.call("observe", path=path, ct=self.ct, **kw)
        return replace(obs, host=replace(obs.host, via=self.label))

    def write_entries(self, path: str, *, dev: int, directory: str):
        """Record an item there and keep its entries file here, in ``directory`` (one
        module run: the file and its bytes come back in one reply)."""
        import base64

        got = self.call("entries_whole", path=path, dev=dev)
        data = b"".join(base64.b64decode(p) for p in got["data"])
        return keep_entries(self.label, path, got, data, directory)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
