"""NFS exports (config side): the parser, and the collector on a temp /etc tree next to a real
loop volume (the real /etc/exports is never touched)."""

import os

import pytest

from vacate.observing.collectors.configured import exports as exports_src
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host
from vacate.observing.parsers import exports


def test_parse_quotes_escapes_continuations_and_defaults():
    text = ('# /etc/exports\n'
            '/srv/nfs4        gss/krb5i(rw,sync,fsid=0,crossmnt,no_subtree_check)\n'
            '"/srv/with space" 192.168.1.0/24(ro) \\\n'
            '    10.0.0.1(rw,no_root_squash)   # trailing comment\n'
            '/srv/My\\040Disk -ro,sync host1 host2(rw)\n'
            'relative/path *(ro)\n')
    entries, problems = exports.parse(text, "/etc/exports")
    assert [(e.line, e.path) for e in entries] == \
        [(2, "/srv/nfs4"), (3, "/srv/with space"), (5, "/srv/My Disk")]
    assert entries[1].clients == (("192.168.1.0/24", "ro"), ("10.0.0.1", "rw,no_root_squash"))
    assert entries[2].clients == (("", "ro,sync"), ("host1", ""), ("host2", "rw"))
    assert [p.path for p in problems] == ["/etc/exports:6"]


@pytest.mark.root
def test_collect_exports_of_the_volume(ext4_volume, tmp_path):
    vol = ext4_volume.mountpoint
    os.makedirs(f"{vol}/work")
    parent = os.path.dirname(vol)
    (tmp_path / "etc/exports.d").mkdir(parents=True)
    (tmp_path / "etc/exports").write_text(
        f"{vol} 127.0.0.1(rw,no_subtree_check,fsid=129)\n"
        "/srv/elsewhere *(ro)\n"
        f"# {vol}/old *(ro)\n"
        f"{parent} 10.0.0.0/8(ro,crossmnt,no_subtree_check)\n"
        f"{vol}x *(ro)\n")
    (tmp_path / "etc/exports.d/lab.exports").write_text(
        f'"{vol}/work" *(ro,no_subtree_check)\n')
    (tmp_path / "etc/exports.d/ignored.conf").write_text(f"{vol} *(rw)\n")
    target = resolve_target(vol)
    consumers, problems = exports_src.collect(Host.under(str(tmp_path)), target, host_view(target))
    assert problems == ()
    by = {c.id: c for c in consumers}
    assert set(by) == {"nfs-export:/etc/exports:1", "nfs-export:/etc/exports:4",
                       "nfs-export:/etc/exports.d/lab.exports:1"}
    assert all(c.type == "nfs-export" and not c.live for c in consumers)
    assert by["nfs-export:/etc/exports:1"].attrs.clients == \
        [{"host": "127.0.0.1", "options": "rw,no_subtree_check,fsid=129"}]
    assert by["nfs-export:/etc/exports:4"].attrs.relation == "crossmnt-parent"
    assert by["nfs-export:/etc/exports.d/lab.exports:1"].paths == (f"{vol}/work",)
