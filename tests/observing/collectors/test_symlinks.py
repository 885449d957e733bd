"""Symlinks elsewhere pointing into the volume: a temp host tree next to a real loop volume,
with absolute, relative, chained, dangling, looping and too-deep links, and a bind mount of the
volume inside the tree that must not be walked."""

import os
import subprocess

import pytest

from vacate.observing.collectors.configured import symlinks as symlinks_src
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.collectors.mounts import resolve_target
from vacate.observing.host import Host


def _link(tree, rel, dest):
    p = tree / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(dest, p)


@pytest.fixture
def tree_and_volume(ext4_volume, tmp_path):
    vol = ext4_volume.mountpoint
    for d in ("models", "bin", "hf"):
        os.makedirs(f"{vol}/{d}")
    os.symlink(f"{vol}/models", f"{vol}/inside-link")      # a link ON the volume: not "elsewhere"
    t = tmp_path
    (t / "etc").mkdir()
    (t / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n"
                                  "alice:x:1000:1000::/home/alice:/bin/bash\n"
                                  "bob:x:1001:1001::/home/bob:/bin/bash\n"
                                  "svc:x:999:999::/var/lib/svc:/usr/sbin/nologin\n"
                                  "nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n")
    _link(t, "etc/models", f"{vol}/models")                          # absolute
    _link(t, "opt/app/data", vol)                                     # the volume root
    _link(t, "srv/rel", "../" * 2 + vol.lstrip("/") + "/hf")          # relative
    _link(t, "usr/local/bin/tool", "/srv/chain")                      # chain: tool -> chain -> vol
    _link(t, "srv/chain", f"{vol}/bin/tool")
    _link(t, "home/alice/.cache/huggingface", f"{vol}/hf")            # home directory
    _link(t, "root/elsewhere", "/srv/not-the-volume")                 # not on it
    _link(t, "etc/gone", f"{vol}/gone")                               # dangling into it
    _link(t, "etc/loop1", "loop2")
    _link(t, "etc/loop2", "loop1")
    _link(t, "etc/prefix", f"{vol}x/models")                          # /mntx is not /mnt
    _link(t, "etc/a/b/c/d/e/f/g/h/i/deep", vol)                       # below the depth limit
    _link(t, "var/lib/svc/x", vol)                                    # not a searched place
    _link(t, "opt/repo/.git/x", vol)                                  # tool-written dirs:
    _link(t, "opt/repo/__pycache__/x", vol)                           # not walked
    os.makedirs(f"{vol}/bob")                                         # a home that is a link
    os.symlink(f"{vol}/models", f"{vol}/bob/models")                  # (on the volume: not walked)
    _link(t, "home/bob", f"{vol}/bob")
    # an NFS mount and an automount point, as the host's mountinfo lists them: never walked
    _link(t, "srv/nfs/x", vol)
    _link(t, "opt/auto/x", vol)
    (t / "proc/self").mkdir(parents=True)
    (t / "proc/self/mountinfo").write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "90 22 0:50 / /srv/nfs rw,relatime shared:40 - nfs4 srv:/export rw,vers=4.2\n"
        "91 22 0:51 / /opt/auto rw,relatime shared:41 - autofs systemd-1 rw,fd=40\n")
    bind = t / "srv/vol"
    bind.mkdir()
    subprocess.run(["mount", "--bind", vol, str(bind)], check=True)
    try:
        yield Host.under(str(t)), resolve_target(vol)
    finally:
        subprocess.run(["umount", str(bind)], check=False)


@pytest.mark.root
def test_links_into_the_volume_are_found(tree_and_volume):
    host, target = tree_and_volume
    vol = target.path
    consumers, problems = symlinks_src.collect(host, target, host_view(target))
    assert problems == ()
    by = {c.id: c for c in consumers}
    assert set(by) == {"symlink:/etc/models", "symlink:/opt/app/data", "symlink:/srv/rel",
                       "symlink:/usr/local/bin/tool", "symlink:/srv/chain",
                       "symlink:/home/alice/.cache/huggingface", "symlink:/etc/gone",
                       "symlink:/home/bob"}
    assert by["symlink:/home/bob"].paths == (f"{vol}/bob",)
    assert by["symlink:/etc/models"].paths == (f"{vol}/models",)
    assert by["symlink:/opt/app/data"].paths == (vol,)
    assert by["symlink:/srv/rel"].paths == (f"{vol}/hf",)
    assert by["symlink:/usr/local/bin/tool"].paths == (f"{vol}/bin/tool",)
    assert by["symlink:/usr/local/bin/tool"].attrs.target == "/srv/chain"
    assert by["symlink:/etc/gone"].attrs.dangling is True
    assert by["symlink:/etc/models"].attrs.dangling is False
    ev = by["symlink:/etc/models"].evidence[0]
    assert ev.kind == "symlink" and ev.detail == f"/etc/models -> {vol}/models"
    assert all(c.type == "symlink" and not c.live for c in consumers)


@pytest.mark.root
def test_search_budget_is_reported(tree_and_volume, monkeypatch):
    host, target = tree_and_volume
    monkeypatch.setattr(symlinks_src, "MAX_ENTRIES", 3)
    _consumers, problems = symlinks_src.collect(host, target, host_view(target))
    assert [p.code for p in problems] == ["search-truncated"]
    assert not problems[0].blocks_verdict


@pytest.mark.root
def test_one_resolver_for_many_links_answers_as_fresh_ones(tree_and_volume):
    """The search resolves every link with one :class:`Resolver` (what each component is, read
    once): each answer, in any order and repeated, is what a resolver of its own gives."""
    from vacate.observing.collectors.configured.resolve import Resolver

    host, target = tree_and_volume
    view = host_view(target)
    paths = ["/etc/models", "/opt/app/data/models/x", "/srv/rel", "/usr/local/bin/tool",
             "/srv/chain", "/etc/gone", "/etc/loop1", "/etc/prefix", "/root/elsewhere",
             "/home/bob/models", "/etc/a/../models", "/srv/./vol/models", "/nowhere/x", "/"]
    shared = Resolver(host, view)
    for p in paths + paths[::-1]:
        assert shared.resolve(p) == Resolver(host, view).resolve(p), p
    assert shared.resolve("/etc/loop1")[1] is None                   # a loop: not on it
    assert shared.resolve("/usr/local/bin/tool")[1] == f"{target.path}/bin/tool"
