"""Reaching a host over the system's ``ssh``: its ``~/.ssh/config``, agent, ``ProxyJump``,
``ControlMaster`` and ``known_hosts`` work as the user set them; vacate only adds
``BatchMode=yes`` (a host-key or password prompt is an error, never a wait), a
``ConnectTimeout`` and keep-alives (a host that stops answering ends the session), and never
writes or bypasses ``known_hosts``.

Nothing is installed on the far host. The command line ssh hands to the far shell is fixed:
``python3 -I -S -c 'import base64;exec(base64.b64decode("..."))'`` (the bootstrap, base64, so no
character of it means anything to a shell), preceded by ``sudo -n`` with ``become``. Every
argument of the work travels in framed requests on stdin (:mod:`vacate.observing.wire`), none
on that command line. The host name is passed after ``--``; one that begins with ``-`` is
refused.

No read waits without a deadline: while it works, the far worker sends a heartbeat every
few seconds (:mod:`vacate.observing.worker`), so a session from which no byte has come for
``stall_s`` seconds (``--stall-timeout``, :data:`STALL_S` by default) has stalled: ssh and
everything it started here are killed, which ends the far side too (its supervisor kills the
worker's process group once the connection goes), and the caller gets :class:`Stalled`,
naming the host and what it was doing.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import signal
import subprocess
import threading
from dataclasses import dataclass

from vacate.observing import wire
from vacate.observing.errors import EXIT_UNKNOWN, UsageError, VacateError
from vacate.observing.worker import STALL_S  # --stall-timeout's default
from vacate.remote import payload

CONNECT_TIMEOUT_S = 10
ALIVE_INTERVAL_S = 5
ALIVE_COUNT = 3
# ssh options the user may add for every host (e.g. -F FILE), split as a shell would
ARGS_ENV = "VACATE_SSH_ARGS"


class Unreachable(VacateError):
    """The far side could not be reached or could not run the observing layer: what uses
    the volume there could not be told (exit 3)."""

    exit_code = EXIT_UNKNOWN


class Stalled(Unreachable):
    """Nothing came from the far side for ``--stall-timeout`` seconds; the session was ended
    (here and there). Exit 3 where it ends a look; a failed, resumable step in an apply."""


@dataclass(frozen=True)
class SshTarget:
    """Where to go: ``host`` (a name ssh resolves, its config's ``Host`` aliases included),
    ``user`` and ``port`` when given, ``options`` more ssh arguments (before the host),
    ``python`` the far interpreter, ``become`` through ``sudo -n`` (as ``become_user``),
    ``stall_s`` the silence that ends the session (:class:`Stalled`)."""

    host: str
    user: str | None = None
    port: int | None = None
    options: tuple[str, ...] = ()
    python: str = "python3"
    become: bool = False
    become_user: str | None = None
    stall_s: float = STALL_S

    @classmethod
    def parse(cls, spec: str, **kw) -> SshTarget:
        """``[USER@]HOST[:PORT]`` (``[ADDR]:PORT`` for IPv6), with the user's extra ssh
        arguments from ``$VACATE_SSH_ARGS``."""
        user = port = None
        host = spec
        if "@" in host:
            user, host = host.rsplit("@", 1)
        if host.startswith("["):
            inner, sep, rest = host[1:].partition("]")
            if not sep or (rest and not rest.startswith(":")):
                raise UsageError(f"--host {spec!r}: expected [ADDRESS]:PORT")
            host, port = inner, rest[1:] or None
        elif host.count(":") == 1:
            host, port = host.split(":")
        if port is not None:
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise UsageError(f"--host {spec!r}: {port!r} is not a port")
            port = int(port)
        check_name(spec, host, user)
        extra = kw.pop("options", None)
        if extra is None:
            extra = tuple(shlex.split(os.environ.get(ARGS_ENV, "")))
        return cls(host=host, user=user or None, port=port, options=tuple(extra), **kw)

    @property
    def label(self) -> str:
        """How people name it: ``user@host:port``."""
        text = f"{self.user}@{self.host}" if self.user else self.host
        return f"{text}:{self.port}" if self.port else text

    def remote_command(self) -> str:
        """What the far login shell runs: the bootstrap, base64."""
        code = base64.b64encode(payload.bootstrap().encode("utf-8")).decode("ascii")
        argv = [self.python, "-I", "-S", "-c", f'import base64;exec(base64.b64decode("{code}"))']
        if self.become:
            argv = ["sudo", "-n"] + (["-u", self.become_user] if self.become_user else []) \
                + ["--"] + argv
        return " ".join(shlex.quote(a) for a in argv)

    def argv(self) -> list[str]:
        """The ssh command line."""
        # ssh takes the first value it is given: BatchMode stays, the user's options may
        # shorten the timeouts
        out = ["ssh", "-o", "BatchMode=yes", *self.options,
               "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
               "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
               "-o", f"ServerAliveCountMax={ALIVE_COUNT}"]
        if self.port:
            out += ["-p", str(self.port)]
        if self.user:
            out += ["-l", self.user]
        return out + ["--", self.host, self.remote_command()]


def check_name(spec: str, host: str, user: str | None) -> None:
    """A host or user that ssh would take for an option, or that holds what no name holds,
    is refused."""
    if not host:
        raise UsageError(f"--host {spec!r}: no host name")
    for what, text in (("host", host), ("user", user or "")):
        if text.startswith("-"):
            raise UsageError(f"--host {spec!r}: a {what} name may not begin with '-'")
        if any(c.isspace() or ord(c) < 32 or c in "'\"`$;&|<>\\" for c in text):
            raise UsageError(f"--host {spec!r}: the {what} name holds a character no "
                             f"{what} name has")


class Session:
    """One ssh session running the observing worker on the far side: :meth:`request` sends
    a request and waits for its reply. The worker lives as long as the session (it ends when
    its stdin does)."""

    def __init__(self, target: SshTarget, *, act: bool = False):
        self.target = target
        self.sent = 0           # bytes written to ssh, for the benchmarks
        self._stderr: list[bytes] = []
        self.proc = subprocess.Popen(target.argv(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        self._boot = wire.frame(wire.BOOT, payload.build(act=act))
        self._stdout = io.BufferedReader(
            wire.Deadlined(self.proc.stdout.fileno(), target.stall_s), 1 << 16)
        self.doing = "connecting"           # what the far side said it was doing, last
        self.beat: dict = {}

    def _start(self) -> None:
        """Wait for the bootstrap to be ready, then send the payload (once)."""
        if self._boot is None:
            return
        try:
            wire.wait_for(self._stdout.readline, wire.READY)
        except wire.Ended:
            raise self._ended() from None
        except wire.Silent:
            raise self._stalled() from None
        self._write(self._boot)
        self._boot = None

    def _drain(self) -> None:
        """Keep ssh's stderr (its own errors, a banner) without letting the pipe fill."""
        for line in iter(self.proc.stderr.readline, b""):
            if len(self._stderr) < 200:
                self._stderr.append(line)

    def _write(self, data: bytes) -> bool:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False       # ssh ended: what it said is read with the missing reply
        self.sent += len(data)
        return True

    def request(self, op: str, args: dict, on_note=None):
        """The reply's value to ``op(**args)``; raises the far side's error as a
        :class:`VacateError` naming the host, and :class:`Unreachable` when the session
        ended or the reply did not arrive whole. ``on_note(value)``: each note the far side
        sends before its reply (a long step's progress)."""
        self._start()
        self.doing, self.beat = f"answering {op}", {}
        body = json.dumps({"op": op, "args": args}, ensure_ascii=True).encode("ascii")
        self._write(wire.frame(wire.REQUEST, body))
        while True:
            try:
                text = wire.read_frame(self._stdout.readline, wire.REPLY)
            except wire.Ended:
                raise self._ended() from None
            except wire.Silent:
                raise self._stalled() from None
            except wire.Damaged as e:
                raise Unreachable(f"{self.target.label}: the reply arrived damaged ({e})") \
                    from None
            reply = json.loads(text.decode("ascii"))
            if not (isinstance(reply, dict) and "note" in reply):
                break
            note = reply["note"]
            if isinstance(note, dict) and isinstance(note.get("beat"), dict):
                self.beat = note["beat"]
                self.doing = str(self.beat.get("doing") or self.doing)
            if on_note is not None:
                on_note(note)
        if "error" in reply:
            raise self._error(reply["error"])
        return reply["ok"]

    def end(self) -> None:
        """Kill ssh and what it started here (a ``ProxyCommand``: ssh runs in a session of
        its own); the far side then ends itself."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _stalled(self) -> Stalled:
        """The session ended for its silence, and why it is named."""
        self.end()
        try:
            self.proc.wait(timeout=CONNECT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        counts = ""
        entries, nbytes = self.beat.get("entries") or 0, self.beat.get("bytes") or 0
        if entries or nbytes:
            counts = f" ({entries:,} entries, {nbytes:,} bytes so far)"
        return Stalled(f"{self.target.label}: nothing came for {self.target.stall_s:g} s "
                       f"while {self.doing}{counts}: the session was ended, and the far "
                       "side with it",
                       hint="a far worker stopped or stuck (a filesystem that does not "
                            "answer), or a link that stopped carrying; --stall-timeout "
                            "SECONDS waits longer")

    def _said(self) -> str:
        lines = [x.decode("utf-8", "replace").strip() for x in self._stderr]
        lines = [x for x in lines if x and not x.startswith("Warning: Permanently added")]
        return " / ".join(lines[-3:])

    def _ended(self) -> VacateError:
        """Why the session ended before replying."""
        try:
            code = self.proc.wait(timeout=CONNECT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._drainer.join(5)           # what ssh said before it ended, read to the end
        said = self._said() or f"ssh exited {code}"
        label, python = self.target.label, self.target.python
        if code == 255:
            return Unreachable(f"{label}: ssh could not reach it: {said}",
                               hint="check that `ssh HOST true` works without a prompt "
                                    "(vacate runs ssh with BatchMode=yes)")
        if self.target.become and "sudo" in said:
            return Unreachable(f"{label}: sudo -n refused: {said}",
                               hint="--become needs sudo without a password for this login")
        if code == 127 or "not found" in said:
            return Unreachable(f"{label}: no {python} there ({said})",
                               hint="install python3 (3.8 or newer) there; nothing else of "
                                    "vacate is needed")
        return Unreachable(f"{label}: the far side ended (exit {code}) before replying: {said}")

    def _error(self, err: dict) -> VacateError:
        return error_from(self.target.label, err)

    def close(self) -> None:
        """Say bye and let the session end (the worker also ends if it cannot be told)."""
        if self.proc.poll() is None:
            self._write(wire.frame(wire.REQUEST, b'{"op":"bye"}'))
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=CONNECT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


def error_from(label: str, err: dict) -> VacateError:
    """The far side's error (the worker's ``error_of``) as the error raised here."""
    kind = err.get("kind")
    message = f"{label}: {err.get('message', 'error')}"
    if kind == "python-too-old":
        return Unreachable(message, hint="install python3 3.8 or newer there, or name one "
                                         "with --python")
    if kind in ("internal", "damaged"):
        detail = err.get("traceback")
        return Unreachable(message + (f"\n{detail}" if detail else ""))
    if kind == "Unanswered" and "target" in err:
        from vacate.observing.errors import Unanswered
        from vacate.observing.model import codec
        from vacate.observing.model.mount import Target

        return Unanswered(message, hint=err.get("hint"),
                          target=codec.decode(Target, err["target"]))
    return VacateError(message, hint=err.get("hint"),
                       exit_code=err.get("exit_code") or EXIT_UNKNOWN)
