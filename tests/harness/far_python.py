"""A far interpreter that watches what vacate's far side does: given to ``--python`` through
a small shell script (:func:`harness.far_watch.wrapper`), it runs the bootstrap exactly as ``python3 -I -S -c
STAGE`` would, in the real interpreter named (or, as an Ansible ``ansible_python_interpreter``,
the module Ansible sends, from a file or stdin), after setting up what the test asks:

- every ``os.fork`` is logged (who forked, which child, from which module), so a test can
  tell that the far worker split its walk, its recognisers and its delete over processes;
- a warning about forking (CPython 3.12+'s "This process is multi-threaded, use of fork()
  may lead to deadlocks") is logged and ends the process with exit 70: the warning made an
  error (CPython swallows the exception ``-W error`` would raise there, so it is caught as
  it is shown);
- ``stop-worker``: the first child the far side forks (the worker; a ``vacate.volume``
  module's worker too) stops itself with ``SIGSTOP`` as it starts, as a worker an admin
  stopped or a debugger froze;
- ``stop-at-delete``: the far worker stops itself once it has forked its first deleter, in
  the middle of an apply's delete step;
- ``slow-walk``: each directory the walk lists costs 20 ms more, so that a walk of a small
  tree lasts long enough to be watched;
- the process's own resource use and its children's (CPU time, largest resident set) are
  logged when the bootstrap's process ends.

Log lines are JSON objects, one a line, appended to the log file (``O_APPEND``: processes
share it). Standard library only; runs under every CPython vacate's far side supports.
"""

import json
import os
import sys
import time

T0 = time.monotonic()
LOG = sys.argv[1]
MODES = set(sys.argv[2].split(",")) if sys.argv[2] else set()
ME = os.getpid()


def log(**fields) -> None:
    fields.setdefault("pid", os.getpid())
    line = (json.dumps(fields) + "\n").encode()
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


_fork = os.fork
_forks = [0]


def fork():
    pid = _fork()
    if pid == 0:
        _forks[0] += 1
        if "stop-worker" in MODES and os.getppid() == ME and _forks[0] == 1:
            import signal

            log(event="stopping", pid=os.getpid())
            os.kill(os.getpid(), signal.SIGSTOP)
    else:
        caller = os.path.basename(sys._getframe(1).f_code.co_filename)
        log(event="fork", child=pid, by=caller)
        if "stop-at-delete" in MODES and caller == "delete.py":
            import signal

            log(event="stopping")
            os.kill(os.getpid(), signal.SIGSTOP)
    return pid


os.fork = fork


def showwarning(message, category, filename, lineno, file=None, line=None):
    text = str(message)
    log(event="warning", category=category.__name__, message=text,
        where=f"{filename}:{lineno}")
    if "fork" in text:
        os._exit(70)


import warnings

warnings.showwarning = showwarning
warnings.simplefilter("always", DeprecationWarning)

if "slow-walk" in MODES:
    _scandir = os.scandir

    def scandir(*a, **kw):
        time.sleep(0.02)
        return _scandir(*a, **kw)

    os.scandir = scandir


def _usage() -> None:
    import resource

    if os.getpid() != ME:
        return
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    log(event="usage", wall_s=time.monotonic() - T0,
        cpu_s=own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
        maxrss_kb=max(own.ru_maxrss, kids.ru_maxrss))


import atexit

atexit.register(_usage)
args = sys.argv[3:]
where = {"__name__": "__main__"}
if "-c" in args:                # vacate's ssh: the bootstrap
    code, name = args[args.index("-c") + 1], "<string>"
    sys.argv = ["-c"]
elif args:                      # an Ansible module as a file (no pipelining)
    name = args[0]
    with open(name) as f:
        code = f.read()
    sys.argv, where["__file__"] = args, name
else:                           # an Ansible module on stdin (pipelining)
    code, name = sys.stdin.read(), "<stdin>"
    sys.argv = [""]
try:
    exec(compile(code, name, "exec"), where)   # noqa: S102 (as the interpreter would)
finally:
    _usage()
    atexit.unregister(_usage)

