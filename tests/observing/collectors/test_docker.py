"""docker: a real dockerd (private data root, socket and exec root) with running and stopped
containers binding a real loop volume; the collector reads the daemon's files only."""

import json
import os

import pytest
from harness.observed import check_both_ways

from vacate.observing.collectors.configured import docker as docker_src
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host
from vacate.output.next_steps import for_consumer as said


@pytest.fixture
def cleanup():
    from harness.docker_box import why_not
    if why := why_not():
        pytest.skip(why)
    made = []
    yield made
    for thing in reversed(made):
        thing.close()


def _by_id(consumers):
    return {c.id: c for c in consumers}


@pytest.mark.root
@pytest.mark.slow
def test_running_and_stopped_containers_binding_the_volume(cleanup):
    from harness.docker_box import IMAGE, start_daemon
    from harness.volumes import make_volume

    vol = make_volume("ext4")
    cleanup.append(vol)
    mnt = vol.mountpoint
    for d in ("work", "images", "cache"):
        os.makedirs(f"{mnt}/{d}")
    box = start_daemon()
    cleanup.append(box)
    box.import_image()
    secret = "hf_" + "x1y2z3" * 5
    box.run("vol-bind", "-v", f"{mnt}:/data", "-w", "/data/work", "--restart", "unless-stopped",
            "-e", f"HF_TOKEN={secret}", "-e", f"CACHE_DIR={mnt}/cache",
            IMAGE, "sleep", "infinity")
    box.run("vol-sub", "--mount", f"type=bind,source={mnt}/images,target=/srv/images,readonly",
            IMAGE, "sleep", "infinity")
    box.run("vol-stopped", "-v", f"{mnt}/work:/work", IMAGE, "true", start=False)
    box.out("volume", "create", "-o", "type=none", "-o", "o=bind", "-o", f"device={mnt}/work",
            "bindvol")
    box.run("vol-named", "--mount", "type=volume,source=bindvol,target=/v", IMAGE, "true",
            start=False)
    box.out("volume", "create", "labvol")      # data under the data root: not on the volume
    box.run("elsewhere", "-v", "labvol:/v", "-v", "/tmp:/host-tmp", IMAGE, "sleep", "infinity")

    target = resolve_target(mnt)
    consumers, problems = docker_src.collect(Host.local(), target, host_view(target))
    assert problems == ()
    by = _by_id(consumers)
    ours = {k for k, c in by.items() if c.attrs.data_root == box.data_root}
    assert ours == {"docker-container:vol-bind", "docker-container:vol-sub",
                    "docker-container:vol-stopped", "docker-container:vol-named"}
    bind = by["docker-container:vol-bind"]
    assert bind.type == "docker-container" and bind.live is False
    assert bind.attrs.running is True
    assert bind.attrs.pid == int(box.inspect("vol-bind", "{{.State.Pid}}"))
    assert bind.attrs.image == IMAGE
    assert bind.attrs.container_id == box.inspect("vol-bind", "{{.Id}}")
    assert set(bind.attrs.relations) == {"bind", "env"}
    assert bind.attrs.restart_policy == "unless-stopped" and bind.attrs.autostart is True
    assert said(bind) == "docker stop vol-bind, then docker rm vol-bind " \
        "(or recreate it without the volume)"
    assert set(bind.paths) == {mnt, f"{mnt}/cache"}
    text = json.dumps([c.as_json() for c in consumers])
    assert secret not in text
    sub = by["docker-container:vol-sub"]
    assert sub.paths == (f"{mnt}/images",) and "(ro)" in sub.evidence[0].detail
    stopped = by["docker-container:vol-stopped"]
    assert stopped.attrs.running is False and stopped.attrs.status == "created"
    assert stopped.paths == (f"{mnt}/work",) and stopped.attrs.autostart is False
    named = by["docker-container:vol-named"]
    assert named.attrs.relations == ["volume-device"] and named.paths == (f"{mnt}/work",)
    # evidence points at the daemon's own file for the container
    cid = box.inspect("vol-stopped", "{{.Id}}")
    assert stopped.evidence[0].source == f"{box.data_root}/containers/{cid}/config.v2.json"

    # stopping a container is seen as such
    box.out("stop", "-t", "1", "vol-bind")
    by = _by_id(docker_src.collect(Host.local(), target, host_view(target))[0])
    assert by["docker-container:vol-bind"].attrs.running is False
    assert by["docker-container:vol-bind"].attrs.status == "exited"


@pytest.mark.root
@pytest.mark.slow
def test_data_root_on_the_volume(cleanup):
    from harness.docker_box import IMAGE, start_daemon
    from harness.volumes import make_volume

    vol = make_volume("ext4", size_mb=400)
    cleanup.append(vol)
    box = start_daemon(data_root=os.path.join(vol.mountpoint, "docker"))
    cleanup.append(box)
    box.import_image()
    box.run("plain", IMAGE, "true", start=False)
    target = resolve_target(vol.mountpoint)
    consumers, problems = docker_src.collect(Host.local(), target, host_view(target))
    assert problems == ()
    by = _by_id(consumers)
    root = by[f"config-file:docker-data-root:{box.data_root}"]
    assert root.paths == (box.data_root,)
    plain = by["docker-container:plain"]
    assert plain.attrs.relations == ["data-root"] and plain.attrs.data_root == box.data_root


def test_data_roots_from_daemon_json_and_dockerd_command_lines(tmp_path):
    (tmp_path / "etc/docker").mkdir(parents=True)
    (tmp_path / "etc/docker/daemon.json").write_text('{"data-root": "/srv/docker"}')
    for pid, argv in ((101, ["dockerd", "--data-root=/data/docker"]),
                      (102, ["/usr/bin/dockerd", "-g", "/old/docker"]),
                      (103, ["dockerd", "--config-file", "/etc/docker/alt.json"]),
                      (104, ["sleep", "--data-root=/nope"]),
                      (105, ["dockerd"])):                     # rootless, as user 1000
        d = tmp_path / "proc" / str(pid)
        d.mkdir(parents=True)
        (d / "comm").write_text(os.path.basename(argv[0]) + "\n")
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (d / "status").write_text(f"Name:\tdockerd\nUid:\t{1000 if pid == 105 else 0}\t0\t0\t0\n")
        (d / "environ").write_bytes(b"PATH=/usr/bin\0HOME=/home/alice\0")
    (tmp_path / "etc/docker/alt.json").write_text('{"data-root": "/alt"}')
    roots = docker_src.data_roots(Host.under(str(tmp_path)))
    assert roots == ["/srv/docker", "/data/docker", "/old/docker", "/alt",
                     "/home/alice/.local/share/docker"]


@pytest.mark.root
@pytest.mark.slow
def test_check_end_to_end_with_stopped_containers(cleanup):
    """`vacate check`: a stopped container that restarts with the daemon blocks; one that
    does not is a reference that breaks when started."""

    from harness.docker_box import IMAGE, start_daemon
    from harness.volumes import make_volume

    vol = make_volume("ext4")
    cleanup.append(vol)
    mnt = vol.mountpoint
    os.makedirs(f"{mnt}/work")
    os.makedirs(f"{mnt}/models")
    box = start_daemon()
    cleanup.append(box)
    box.import_image()
    box.run("comes-back", "--restart", "always", "-v", f"{mnt}/models:/models", IMAGE, "true",
            start=False)
    box.run("idle", "-v", f"{mnt}/work:/work", IMAGE, "true", start=False)
    rc, doc = check_both_ways(mnt, "--no-scan", timeout=120)     # also decided from a saved one
    assert rc == 1 and doc["verdict"]["safe_to_unmount"] is False
    # the consumers this test made (whatever else runs on the machine may add its own,
    # e.g. a mount of the volume by another test's namespace)
    ours = {"docker-container:comes-back", "docker-container:idle"}
    blockers = {b["consumer"]: b for b in doc["verdict"]["blockers"]}
    assert set(blockers) & ours == {"docker-container:comes-back"}
    assert blockers["docker-container:comes-back"]["action"].startswith("docker rm comes-back")
    items = {it["path"]: it for it in doc["items"]}
    assert [u for u in items[f"{mnt}/work"]["users"] if u in ours] == ["docker-container:idle"]
    if items[f"{mnt}/work"]["users"] == ["docker-container:idle"]:
        assert items[f"{mnt}/work"]["status"] == "referenced"


@pytest.mark.root
def test_default_data_root_symlinked_onto_the_volume(ext4_volume, tmp_path):
    """/var/lib/docker -> /data/docker (a common way to move docker's storage): the data root
    and every container in it are on the volume. Files in the shape docker 20.10 writes."""
    vol = ext4_volume.mountpoint
    cid = "ab" * 32
    cdir = os.path.join(vol, "docker", "containers", cid)
    os.makedirs(cdir)
    with open(os.path.join(cdir, "config.v2.json"), "w") as f:
        json.dump({"ID": cid, "Name": "/web", "Config": {"Image": "nginx", "Env": []},
                   "State": {"Running": False, "StartedAt": "2026-11-30T10:00:00Z"},
                   "MountPoints": {}}, f)
    with open(os.path.join(cdir, "hostconfig.json"), "w") as f:
        json.dump({"Binds": None, "RestartPolicy": {"Name": "always"}}, f)
    (tmp_path / "var/lib").mkdir(parents=True)
    os.symlink(os.path.join(vol, "docker"), tmp_path / "var/lib/docker")
    target = resolve_target(vol)
    consumers, problems = docker_src.collect(Host.under(str(tmp_path)), target, host_view(target))
    assert problems == ()
    by = _by_id(consumers)
    assert by["config-file:docker-data-root:/var/lib/docker"].paths == (f"{vol}/docker",)
    web = by["docker-container:web"]
    assert web.attrs.relations == ["data-root"] and web.attrs.status == "exited"
    assert web.attrs.autostart is True
