"""The delete's loop over a directory in C (``_fastdel``) and in Python do the same: two copies
of a tree, changed the same way after they were recorded (a file written, a file replaced by
one of the same name, a directory swapped for a symlink, a file for a directory, a hardlink
added, files changed, a second name removed, names that are not UTF-8), deleted one each way,
leave the same entries, keep and name the same ones for the same reasons, and count the
same. From the record in memory (rows as tuples) and from an entries file (rows as lists)."""

import os
import shutil

import pytest
from harness.delete_trees import (
    delete,
    put,
    tree,
)

from vacate.act import delete as deleting
from vacate.act.delete import EntriesFile, record_entries
from vacate.observing.entries import write_entries_file

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(deleting.fastdel is None, reason="_fastdel was not built")]


def make(base):
    put(f"{base}/a/b/c/deep.bin", b"d" * 5000)
    put(f"{base}/a/one.txt", b"one")
    os.link(f"{base}/a/one.txt", f"{base}/a/b/hardlink")
    put(f"{base}/same-size.txt", b"aaaa")
    put(f"{base}/empty-file", b"")
    put(f"{base}/to-be-a-dir", b"f")
    put(f"{base}/swap/inside.txt", b"in")
    put(f"{base}/two/x", b"xx")
    os.link(f"{base}/two/x", f"{base}/two/y")
    put(os.fsdecode(os.fsencode(base) + b"/odd/caf\xe9"), b"odd")
    os.makedirs(f"{base}/empty-dir")
    os.symlink("a/one.txt", f"{base}/rel-link")
    os.mkfifo(f"{base}/a/fifo")
    for i in range(300):                                     # a wider directory
        put(f"{base}/wide/f{i:03}", b"w" * i)


def change(base, aside):
    put(f"{base}/a/b/late.txt", b"written after the plan")                 # new
    os.unlink(f"{base}/empty-file")                                         # replaced
    put(f"{base}/empty-file", b"")
    os.rename(f"{base}/swap", aside)                                        # dir -> symlink
    os.symlink(aside, f"{base}/swap")
    os.unlink(f"{base}/to-be-a-dir")                                        # file -> dir
    os.mkdir(f"{base}/to-be-a-dir")
    os.link(f"{base}/wide/f007", f"{base}/wide/new-link")                   # hardlink added
    with open(f"{base}/a/b/c/deep.bin", "ab") as f:                         # grown
        f.write(b"more")
    with open(f"{base}/same-size.txt", "r+b") as f:                         # rewritten
        f.write(b"bbbb")
    os.unlink(f"{base}/two/y")                   # x's ctime moves, its link count goes down
    put(os.fsdecode(os.fsencode(base) + b"/odd/new-\xff"), b"new")          # new, odd name
    os.unlink(f"{base}/wide/f100")                                          # already gone


def outcome(r, base, aside):
    def rel(p):
        return os.path.relpath(p, base)

    return {"outcome": r.outcome, "gone": r.gone, "entries": r.entries, "bytes": r.bytes,
            "disk_bytes": r.disk_bytes,
            "kept": sorted((rel(k.path), k.reason, k.detail) for k in r.kept),
            "errors": sorted((p.code, rel(p.path), p.message.replace(base, "ITEM"))
                             for p in r.errors),
            "manual": sorted((rel(m.path), m.reason) for m in r.manual),
            "left": tree(base), "aside": tree(aside)}


@pytest.mark.parametrize("where", ["memory", "file"])
def test_the_c_loop_deletes_keeps_and_counts_as_the_python_loop(vol, monkeypatch, tmp_path,
                                                                 where):
    dev = os.stat(vol.mountpoint).st_dev
    results = {}
    for way, mod in (("c", deleting.fastdel), ("python", None)):
        base = os.path.join(vol.mountpoint, f"item-{way}")
        aside = os.path.join(vol.mountpoint, f"aside-{way}")
        make(base)
        rec = record_entries(base, dev=dev)
        if where == "file":
            w = write_entries_file(base, dev=dev, directory=str(tmp_path))
            rec = EntriesFile(os.path.join(str(tmp_path), w.file), sha256=w.sha256,
                              index_at=w.index_at)
        change(base, aside)
        monkeypatch.setattr(deleting, "fastdel", mod)
        try:
            r = delete(vol, base, rec)
        finally:
            if where == "file":
                rec.close()
        results[way] = outcome(r, base, aside)
        shutil.rmtree(base)
    c, py = results["c"], results["python"]
    assert c == py
    kept = {path: (reason, detail) for path, reason, detail in c["kept"]}
    assert {path: reason for path, (reason, _) in kept.items()} == {
        "a/b/late.txt": "new", "empty-file": "changed", "swap": "changed",
        "to-be-a-dir": "changed", "wide/f007": "changed", "wide/new-link": "new",
        "a/b/c/deep.bin": "changed", "same-size.txt": "changed",
        os.fsdecode(b"odd/new-\xff"): "new"}
    assert kept["to-be-a-dir"][1] == "replaced: a directory where the plan has a file"
    assert "5000 bytes in the plan, 5004 now" in kept["a/b/c/deep.bin"][1]
    assert c["outcome"] == "failed" and not c["gone"] and not c["errors"]
    assert c["aside"] == [b"inside.txt"]                 # the symlink's target untouched
    assert b"two" not in c["left"]                       # x went: only its other name did
