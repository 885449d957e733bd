"""Files of a staged /etc (cron, fstab, units) and the target they name: ``/data`` on a loop
device."""

import os

from vacate.observing.model.mount import Mount, Target


def write(root, rel, text, mode=0o644):
    path = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def data_target():
    m = Mount(10, 1, 7, 3, "/", "/data", ("rw",), (), "ext4", "/dev/loop3", ())
    return Target("/data", m, 0, None, None, None, True, "", None, (), ())
