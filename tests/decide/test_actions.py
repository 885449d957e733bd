"""Actions are values: the command for each place a unit's manager can be, the values'
JSON, and the sentence rendered from them (never parsed back)."""

import pytest

from vacate.decide.actions import actions_for, container_place
from vacate.observing.model.action import Action, Where
from vacate.observing.model.codec import Malformed
from vacate.observing.model.conditions import UnitProcess
from vacate.observing.model.sentence import render
from vacate.observing.model.usage import Consumer, Evidence

STOP = ("systemctl", "stop", "x.service")


@pytest.mark.parametrize("where, command", [
    (Where(), STOP),
    (Where("machine", name="box"), ("systemctl", "-M", "box", "stop", "x.service")),
    (Where("machine", name="box", user="alice"),
     ("systemctl", "--user", "-M", "alice@box", "stop", "x.service")),
    (Where(user="alice"), ("systemctl", "--user", "-M", "alice@", "stop", "x.service")),
    (Where("pct", name="129"), ("pct", "exec", "129", "--keep-env", "0", "--", *STOP)),
    (Where("pct", name="129", user="bob"),
     ("pct", "exec", "129", "--keep-env", "0", "--", "systemctl", "--user", "-M", "bob@", "stop", "x.service")),
    (Where("lxc", name="web", lxcpath="/srv/lxc"),
     ("lxc-attach", "-P", "/srv/lxc", "-n", "web", "--", *STOP)),
    (Where("pid-namespace", pid=42), ("nsenter", "-t", "42", "-a", *STOP)),
    (Where("docker", name="web"), ("docker", "exec", "web", *STOP)),
])
def test_one_place_decides_how_a_manager_is_reached(where, command):
    assert where.wrap(STOP) == command


def test_a_command_in_another_mount_namespace():
    assert Where("mount-namespace", pid=7).wrap(("umount", "/x")) == \
        ("nsenter", "-t", "7", "-m", "umount", "/x")


@pytest.mark.parametrize("ct, kind, name", [
    ({"type": "nspawn", "name": "box"}, "machine", "box"),
    ({"type": "lxc", "name": "129", "ctid": 129}, "pct", "129"),
    ({"type": "pve", "name": "131", "init_pid": 9}, "pct", "131"),
    ({"type": "lxc", "name": "web"}, "lxc", "web"),
    ({"type": "docker", "name": "0123456789abcdef", "docker_name": None}, "docker",
     "0123456789ab"),
])
def test_container_places(ct, kind, name):
    w = container_place(ct)
    assert (w.kind, w.name) == (kind, name)


def test_actions_round_trip_and_refuse_what_they_are_not():
    a = Action("stop-unit", "x.service", STOP, Where("pct", name="129"),
               precondition=UnitProcess("x.service", 5, 77), consumer="p")
    assert Action.from_json(a.to_json()) == a
    with pytest.raises(ValueError):
        Action("rm-rf", "/", ("rm", "-rf", "/"))
    bad = dict(a.to_json(), argv="systemctl stop x")
    with pytest.raises(Malformed, match="action.argv: expected a list"):
        Action.from_json(bad)
    with pytest.raises(Malformed, match="unknown action kind"):
        Action.from_json(dict(a.to_json(), kind="format-disk"))


def _c(cid, ctype, live=False, **attrs):
    return Consumer(cid, ctype, cid.split(":")[-1], live, ("/data/x",),
                    (Evidence("config-line", "/data/x", "/etc/thing:3", "x"),), attrs)


def test_sentences_are_rendered_from_the_values():
    fstab = _c("fstab:/etc/fstab:3", "fstab")
    (edit,) = actions_for(fstab, {})
    assert (edit.kind, edit.params.file, edit.params.line) == ("edit-config",
                                                                     "/etc/thing", 3)
    assert render((edit,)) == ("remove or comment out the entry at /etc/thing:3 "
                               "(then: systemctl daemon-reload)")
    docker = _c("docker-container:web", "docker-container", running=True)
    assert [a.kind for a in actions_for(docker, {})] == ["stop-container", "remove-container"]
    assert render(actions_for(docker, {})) == \
        "docker stop web, then docker rm web (or recreate it without the volume)"
    odd = _c("swap:/data/my swap", "swap", live=True, swap_path="/data/my swap")
    assert render(actions_for(odd, {})) == "swapoff '/data/my swap'"      # quoted for a shell
    loop = _c("loop-device:/dev/loop9", "loop-device", live=True, device="/dev/loop9",
              mounted_at=["/mnt/a", "/mnt/b"], backing_file="/data/img")
    assert [a.argv for a in actions_for(loop, {})] == [
        ("umount", "/mnt/b"), ("umount", "/mnt/a"), ("losetup", "-d", "/dev/loop9")]
    assert render(actions_for(loop, {})) == "umount /mnt/b && umount /mnt/a && losetup -d /dev/loop9"
    snaps = _c("pve-container:130", "pve-container", vmid=130, keys=[], pending_keys=[],
               snapshots=["before", "b2"])
    assert render(actions_for(snaps, {})) == ("pct delsnapshot 130 before; pct delsnapshot 130 "
                                              "b2 (only snapshots still name the volume)")
