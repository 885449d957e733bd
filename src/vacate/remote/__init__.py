"""Where the observing layer runs: in this process (:class:`Local`) or on another host over
ssh (:class:`Remote`), both answering the same operations (:mod:`vacate.observing.ops`) with
the same values. The flows (``vacate.flow``) take one and never ask which."""

from __future__ import annotations

import os
from dataclasses import replace

from vacate.observing.host import Host


class Local:
    """The observing layer in this process, on ``host``'s trees."""

    def __init__(self, host: Host | None = None, *, ct: str | None = None):
        self.host = host or Host.local()
        self.ct = ct
        self.label = None if ct is None else f"CT {ct}"

    def call(self, op: str, on_note=None, **args):
        from vacate.observing.ops import OPS

        return OPS[op](self.host, **args)

    def observe(self, path: str, progress=None, **kw):
        """The observation of ``path``; ``progress(entries, bytes)`` now and then during the
        walk."""
        return self.call("observe", path=path, ct=self.ct, progress=progress, **kw)

    def write_entries(self, path: str, *, dev: int, directory: str):
        """Record an item into an entries file in ``directory``; what it came to."""
        from vacate.observing.ops import write_entries

        return write_entries(self.host, path, dev=dev, directory=directory)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _decode_observation(v):
    from vacate.observing.model.observation import Observation

    return Observation.from_json(v)


def _decode_target(v):
    from vacate.observing.model import codec
    from vacate.observing.model.mount import Target

    return codec.decode(Target, v)


def _decode_entries(v):
    from vacate.observing.entries import EntryList

    return EntryList.from_json(v)


def _decode_recorded(v):
    from vacate.observing.entries import Recorded
    from vacate.observing.model import codec
    from vacate.observing.model.common import Problem

    if not isinstance(v, dict):
        raise codec.Malformed("", "expected an object for a recorded item")
    fields = dict(v)
    fields["root"] = tuple(fields.get("root") or ())
    fields["problems"] = tuple(codec.decode(Problem, p) for p in fields.get("problems", ()))
    try:
        return Recorded(**fields)
    except TypeError as e:
        raise codec.Malformed("", f"not a recorded item: {e}") from None


def _decode_stats(v):
    from vacate.observing.model import codec
    from vacate.observing.model.inventory import Stats

    return None if v is None else codec.decode(Stats, v)


def _decode_ct_view(v):
    from vacate.observing.model import codec
    from vacate.observing.model.observation import CtView

    return codec.decode(CtView, v)


def _decode_dataset(v):
    from vacate.observing.model import codec
    from vacate.observing.model.dataset import DatasetFacts

    return codec.decode(DatasetFacts, v)


DECODE = {"observe": _decode_observation, "ct_view": _decode_ct_view, "target": _decode_target,
          "record_entries": _decode_entries, "record_item": _decode_recorded,
          "file_stats": _decode_stats, "zfs_dataset": _decode_dataset}


ENTRIES_PIECE = 4 << 20      # an entries file is fetched in pieces this big


class Remote:
    """The observing layer on another host through an ssh :class:`~vacate.remote.ssh.Session`
    (started on first use, ended by :meth:`close`)."""

    def __init__(self, target, *, ct: str | None = None, act: bool = False, progress=None):
        self.target = target
        self.ct = ct
        self.progress = progress        # the far walk's progress (entries, bytes), if wanted
        self.act = act                  # the acting half sent too (for apply)
        self.label = target.label + ("" if ct is None else f", CT {ct}")
        self._session = None

    @property
    def session(self):
        if self._session is None:
            from vacate.remote.ssh import Session

            self._session = Session(self.target, act=self.act)
        return self._session

    def call(self, op: str, on_note=None, **args):
        value = self.session.request(op, args, on_note)
        decode = DECODE.get(op)
        return decode(value) if decode else value

    def observe(self, path: str, progress=None, **kw):
        """The observation of ``path``; ``progress(entries, bytes)`` as the far side's
        heartbeat tells of its walk."""
        progress = progress or self.progress

        def on_note(note):
            b = note.get("beat") if isinstance(note, dict) else None
            if progress is not None and isinstance(b, dict) and b.get("entries"):
                progress(int(b["entries"]), int(b.get("bytes") or 0))

        obs = self.call("observe", on_note=on_note, path=path, ct=self.ct, **kw)
        t = self.target
        return replace(obs, host=replace(obs.host, via=self.label, ssh=t.label,
                                         python="" if t.python == "python3" else t.python,
                                         become=t.become))

    def write_entries(self, path: str, *, dev: int, directory: str):
        """Record an item there and keep its entries file here, in ``directory``, under the
        name its sha256 gives it (checked: what arrived is what was recorded); the file
        comes in pieces."""
        import base64

        got = self.call("entries_file", path=path, dev=dev)
        size = int(got["size"])
        data = bytearray()           # asked for in pieces: no reply holds the whole file
        while True:
            piece = base64.b64decode(self.call("entries_piece", name=got["name"],
                                               offset=len(data), size=ENTRIES_PIECE))
            data += piece
            if len(data) >= size or not piece:
                break
        return keep_entries(self.label, path, got, bytes(data), directory)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def keep_entries(label: str, path: str, got: dict, data: bytes, directory: str):
    """Keep an entries file recorded on a far host (``got``: what ``entries_file`` said,
    ``data`` its bytes) in ``directory``, under the name its sha256 gives it, once it is
    checked: what arrived is what was recorded."""
    import hashlib

    from vacate.observing.errors import VacateError
    from vacate.observing.fsio import write_atomic

    rec = _decode_recorded(got["recorded"])
    name = os.path.basename(got["name"])
    if len(data) != int(got["size"]) or hashlib.sha256(data).hexdigest() != rec.sha256:
        raise VacateError(f"{label}: the entries of {path} arrived damaged")
    write_atomic(os.path.join(directory, name), data)
    return replace(rec, file=name)


def reach(args, host: Host | None = None, progress=None):
    """The reach a command's ``--host`` / ``--become`` / ``--python`` / ``--ct`` ask for;
    ``progress(entries, bytes)``: told of a far walk's progress."""
    spec = getattr(args, "remote", None)
    ct = getattr(args, "ct", None)
    if spec is None:
        return Local(host, ct=ct)
    from vacate.remote.ssh import SshTarget

    return Remote(SshTarget.parse(spec, python=getattr(args, "python", None) or "python3",
                                  become=bool(getattr(args, "become", False)),
                                  stall_s=stall_of(args)), ct=ct, progress=progress)


def stall_of(args) -> float:
    """The ``--stall-timeout`` given (checked), or the default."""
    from vacate.observing.errors import UsageError
    from vacate.remote.ssh import STALL_S

    s = getattr(args, "stall_timeout", None)
    if s is None:
        return STALL_S
    if not s > 0:
        raise UsageError("--stall-timeout must be more than 0")
    return s


def add_stall_argument(p, ends: str) -> None:
    """``--stall-timeout``; ``ends``: what a stall does to this command, for its help."""
    p.add_argument("--stall-timeout", type=float, metavar="SECONDS",
                   help="with --host: end the session when nothing has come from the far "
                        "side for this long (default 30; it sends a heartbeat every 2 s "
                        f"while it works); {ends}")


def add_arguments(p, stalled: str = "a stall exits 3 (could not tell)") -> None:
    """``--host``, ``--become``, ``--python``, ``--stall-timeout`` and ``--ct`` on a command
    that observes (``stalled``: what a stall does to it, for the help)."""
    p.add_argument("--host", dest="remote", metavar="[USER@]HOST[:PORT]",
                   help="look at HOST over ssh (nothing is installed there; it needs python3 "
                        "3.8+); decide here")
    p.add_argument("--become", action="store_true",
                   help="with --host: run the far side as root through sudo -n")
    p.add_argument("--python", metavar="PATH",
                   help="with --host: the far interpreter (default python3)")
    add_stall_argument(p, stalled)
    p.add_argument("--ct", metavar="CTID",
                   help="on a Proxmox host: PATH as container CTID sees it")
