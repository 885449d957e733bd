"""Docker data roots, found in one place (``docker.data_roots``, also used to name the docker
containers of holders): daemon.json, the docker.service unit's ExecStart=, rootless daemons
installed by users, and running dockerds' command lines and environment."""

import os

from harness.etc_files import write

from vacate.observing.collectors.configured import docker
from vacate.observing.collectors.procs import _Pass
from vacate.observing.host import Host


def proc(root, pid, argv, uid=0, env=b"PATH=/usr/bin\0"):
    d = os.path.join(root, "proc", str(pid))
    os.makedirs(d)
    write(root, f"/proc/{pid}/comm", os.path.basename(argv[0])[:15] + "\n")
    with open(os.path.join(d, "cmdline"), "wb") as f:
        f.write(b"\0".join(a.encode() for a in argv) + b"\0")
    write(root, f"/proc/{pid}/status", f"Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    with open(os.path.join(d, "environ"), "wb") as f:
        f.write(env)


def test_every_flag_spelling_of_running_daemons(tmp_path):
    root = str(tmp_path)
    for pid, argv in ((201, ["dockerd", "-g", "/a"]), (202, ["dockerd", "--graph=/b"]),
                      (203, ["dockerd", "-g/c"]), (204, ["dockerd", "--graph", "/d"]),
                      (205, ["dockerd", "--config-file=/etc/docker/e.json"]),
                      (206, ["dockerd", "-H", "fd://"])):
        proc(root, pid, argv)
    write(root, "/etc/docker/e.json", '{"graph": "/e"}')
    write(root, "/etc/docker/daemon.json", '{"data-root": "/srv/docker"}')
    # a daemon without flags uses daemon.json's root, not the default
    assert docker.data_roots(Host.under(root)) == ["/srv/docker", "/a", "/b", "/c", "/d", "/e"]


def test_roots_of_the_docker_unit_and_of_rootless_daemons(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/passwd", "root:x:0:0::/root:/bin/bash\nal:x:1000:1000::/home/al:/bin/sh\n"
          "bo:x:1001:1001::/home/bo:/bin/sh\n")
    write(root, "/lib/systemd/system/docker.service",
          "[Service]\nEnvironmentFile=-/etc/default/docker\n"
          "ExecStart=/usr/bin/dockerd -H fd:// $DOCKER_OPTS\n")
    write(root, "/etc/default/docker", 'DOCKER_OPTS="--data-root /mnt/fast/docker"\n')
    # a drop-in replaces the command line (ExecStart= empties the list first)
    write(root, "/etc/systemd/system/docker.service.d/10-root.conf",
          "[Service]\nExecStart=\nExecStart=/usr/bin/dockerd -g /srv/unit-docker\n")
    # al installed rootless docker (dockerd-rootless-setuptool.sh) and it is stopped
    write(root, "/home/al/.config/systemd/user/docker.service",
          "[Service]\nExecStart=/usr/bin/dockerd-rootless.sh\n")
    # bo's rootless daemon runs with XDG_DATA_HOME set
    proc(root, 301, ["dockerd"], uid=1001, env=b"HOME=/home/bo\0XDG_DATA_HOME=/data/bo\0")
    # a second one of bo's, started with a config file that names its root
    proc(root, 302, ["dockerd", "--config-file", "/home/bo/alt.json"], uid=1001,
         env=b"HOME=/home/bo\0")
    write(root, "/home/bo/alt.json", '{"data-root": "/data/bo-alt"}')
    assert docker.data_roots(Host.under(root)) == [
        "/var/lib/docker", "/srv/unit-docker", "/home/al/.local/share/docker", "/data/bo/docker",
        "/data/bo-alt"]


def test_the_process_reader_names_containers_from_the_same_roots(tmp_path):
    root = str(tmp_path)
    proc(root, 201, ["dockerd", "-g", "/graph"])
    cid = "a" * 64
    write(root, f"/graph/containers/{cid}/config.v2.json", '{"Name": "/web"}')
    p = _Pass(Host.under(root), None, (0, 0), (), (), None)
    assert p.docker_name(cid) == "web"


def test_unreadable_daemon_json_is_a_problem(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "etc/docker"))
    os.mkfifo(os.path.join(root, "etc/docker/daemon.json"))
    problems: list = []
    assert docker.data_roots(Host.under(root), problems) == ["/var/lib/docker"]
    assert [(p.path, p.blocks_verdict) for p in problems] == [("/etc/docker/daemon.json", True)]
