"""Samba shares (config side): the parser on Debian's real default smb.conf, and the collector
on a temp /etc tree (with includes and user shares) next to a real loop volume."""

import os

import pytest
from harness.paths import FIXTURES

from vacate.observing.collectors.configured import smb as smb_src
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host
from vacate.observing.parsers import smb_conf

DEFAULT = os.path.join(FIXTURES, "samba", "debian-bookworm-default-smb.conf")


def test_parse_debian_default_smb_conf():
    with open(DEFAULT) as f:
        params, problems = smb_conf.parse(f.read())
    assert problems == ()
    sections = {p.section for p in params}
    assert sections == {"global", "homes", "printers", "print$"}
    by = {(p.section, p.name): p.value for p in params}
    assert by[("printers", "path")] == "/var/tmp"
    assert by[("homes", "readonly")] == "yes"          # "read only" normalised
    assert by[("global", "logfile")] == "/var/log/samba/log.%m"


def test_parse_continuations_synonyms_and_comments():
    params, problems = smb_conf.parse(
        "[Data]\n  Directory = /srv/a \\\n/b\n; path = /nope\n# also not\nwriteable = yes\nbad\n")
    assert [(p.line, p.section, p.name, p.value) for p in params] == \
        [(2, "Data", "path", "/srv/a  /b"), (6, "Data", "writable", "yes")]
    assert [p.path for p in problems] == ["smb.conf:7"]


@pytest.mark.root
def test_collect_shares_on_the_volume(ext4_volume, tmp_path):
    vol = ext4_volume.mountpoint
    with open(DEFAULT) as f:
        default = f.read()
    (tmp_path / "etc/samba").mkdir(parents=True)
    (tmp_path / "etc/samba/smb.conf").write_text(
        default + "\n   include = /etc/samba/shares.conf\n"
        + f"[Models]\n   path = {vol}/models\n   read only = no\n"
        + "[Old]\n   path = /srv/old\n   root preexec = " + vol + "/bin/mount-old.sh\n"
        + "   available = no\n")
    (tmp_path / "etc/samba/shares.conf").write_text(
        f"[scratch]\n   path = {vol}/\n   writable = yes\n"
        "[other]\n   path = /srv/other\n"
        "   include = /etc/samba/%m.conf\n")
    (tmp_path / "var/lib/samba/usershares").mkdir(parents=True)
    (tmp_path / "var/lib/samba/usershares/alice").write_text(
        f"#VERSION 2\npath={vol}/alice\ncomment=\nusershare_acl=S-1-1-0:F,\nguest_ok=n\n")
    target = resolve_target(vol)
    consumers, problems = smb_src.collect(Host.under(str(tmp_path)), target, host_view(target))
    by = {c.id: c for c in consumers}
    assert set(by) == {"smb-share:Models", "smb-share:Old", "smb-share:scratch",
                       "smb-share:alice"}
    assert all(c.type == "smb-share" and not c.live for c in consumers)
    models = by["smb-share:Models"]
    assert models.paths == (f"{vol}/models",) and models.attrs.read_only is False
    assert models.evidence[0].source.startswith("/etc/samba/smb.conf:")
    assert by["smb-share:scratch"].evidence[0].source == "/etc/samba/shares.conf:2"
    assert by["smb-share:scratch"].attrs.read_only is False
    old = by["smb-share:Old"]
    assert old.attrs.relations == ["config-path"] and old.attrs.available is False
    assert by["smb-share:alice"].attrs.usershare is True
    assert [p.code for p in problems] == ["unresolved-include"]
