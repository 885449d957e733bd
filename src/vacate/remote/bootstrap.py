# The first thing that runs on a far host: ``python3 -I -S -c 'exec(b64decode(THIS))'``.
#
# It is sent as the command line's only argument, so it is small, and it is written for any
# Python 3 (no f-strings). Where stdin is a terminal (ssh -tt, RequestTTY in a config) it is
# made raw first: no echo of what is sent (an echo flushed late can land inside a reply), no
# line editing. Then it says VACATE-READY, and only then is anything sent to it. An
# interpreter older than vacate's floor answers with a framed error naming its version, never
# a traceback. Then it reads the payload (the observing package as a
# zip, framed as VACATE-BOOT on stdin), checks its length and sha256, imports it from memory
# (a finder placed first on sys.meta_path; nothing is written to disk, and -I -S keep an
# installed vacate, PYTHONPATH or a json.py in the login's directory out of reach) and hands
# stdin and stdout to vacate.observing.worker.serve, with what it read past the payload (it
# reads stdin unbuffered, with os.read: the worker is forked and reads from a pipe). Reading
# the frame is repeated here from vacate.observing.wire because nothing can be imported
# before the payload is. No thread is started here: the worker is forked next.
import sys

MINIMUM = (3, 8)


def reply(kind, message):
    import base64
    import hashlib
    import json
    body = json.dumps({"error": {"kind": kind, "message": message}}).encode("ascii")
    text = base64.b64encode(body)
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else sys.stdout
    out.write(b"VACATE-REP " + str(len(body)).encode() + b" "
              + hashlib.sha256(body).hexdigest().encode() + b"\n")
    for i in range(0, len(text), 76):
        out.write(text[i:i + 76] + b"\n")
    out.write(b"VACATE-REP-END\n")
    out.flush()


try:
    import os
    import tty
    if os.isatty(0):
        tty.setraw(0)
except Exception:  # noqa: BLE001  (a terminal that cannot be set is used as it is)
    pass
_out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else sys.stdout
_out.write(b"VACATE-READY\n")
_out.flush()

if sys.version_info < MINIMUM:
    reply("python-too-old", "%s is Python %s; vacate needs %d.%d or newer"
          % (sys.executable or "python3", sys.version.split()[0], MINIMUM[0], MINIMUM[1]))
    sys.exit(0)

import base64
import hashlib
import importlib.abc
import importlib.util
import io
import os
import zipfile


class Lines:
    """Lines of stdin read with os.read; ``rest`` is what was read past the last line
    asked for."""

    def __init__(self):
        self.rest = b""

    def readline(self):
        while b"\n" not in self.rest:
            data = os.read(0, 65536)
            if not data:
                line, self.rest = self.rest, b""
                return line
            self.rest += data
        line, _, self.rest = self.rest.partition(b"\n")
        return line + b"\n"


def read_boot(readline):
    while True:
        line = readline()
        if not line:
            return None
        at = line.find(b"VACATE-BOOT ")
        if at >= 0:
            fields = line[at:].split()
            if len(fields) == 3 and fields[1].isdigit():
                break
    parts = []
    while True:
        line = readline()
        if not line:
            return None
        line = line.strip()
        if line == b"VACATE-BOOT-END":
            break
        parts.append(line)
    body = base64.b64decode(b"".join(parts))
    if len(body) != int(fields[1]) or hashlib.sha256(body).hexdigest().encode() != fields[2]:
        return None
    return body


class Payload(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Modules of the payload zip, imported from memory."""

    def __init__(self, data):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            self.files = {n: z.read(n) for n in z.namelist() if n.endswith(".py")}

    def find_spec(self, name, path=None, target=None):
        base = name.replace(".", "/")
        if base + "/__init__.py" in self.files:
            return importlib.util.spec_from_loader(name, self, origin="payload:" + base
                                                   + "/__init__.py", is_package=True)
        if base + ".py" in self.files:
            return importlib.util.spec_from_loader(name, self, origin="payload:" + base + ".py")
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        key = module.__spec__.origin[len("payload:"):]
        exec(compile(self.files[key], "<vacate payload>/" + key, "exec"), module.__dict__)


stdin = Lines()
data = read_boot(stdin.readline)
if data is None:
    reply("damaged", "the payload did not arrive whole")
    sys.exit(0)
payload = Payload(data)
sys.meta_path.insert(0, payload)
from vacate.observing import worker

ops = None
if "vacate/act/far.py" in payload.files:      # the acting half, sent for apply
    from vacate.act import far
    ops = far.OPS
sys.exit(worker.serve(ops=ops, rest=stdin.rest))
