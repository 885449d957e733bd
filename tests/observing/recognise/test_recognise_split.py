"""The biggest item split over the two processes: while this process looks at the first
subdirectories of the biggest item, the forked child looks at the later ones, and this one takes
them over in order. The result is what one process says, item for item and problem for
problem, also where the item's entry budget runs out among the child's subdirectories and
where the child fails. Nothing here needs root."""

from __future__ import annotations

import os
import time

import pytest
from harness.model_trees import hub_repo, small_model

from vacate.observing.collectors import walk
from vacate.observing.model.inventory import Item
from vacate.observing.recognise import annotate, explore, sidebyside


def hub_volume(root: str, repos: int = 40) -> tuple:
    src = os.path.join(root, "..", "src")
    small_model(src)
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        weights = f.read()
    with open(os.path.join(src, "config.json"), "rb") as f:
        conf = f.read()
    hub = os.path.join(root, "hub")
    for i in range(repos):
        files = {"config.json": conf, "model.safetensors": weights + b"\0" * i}
        if i % 7 == 3:
            files["config.json"] = b"{not json"              # a problem, in its place
        if i % 5 == 0:
            files.update({f"model-{k:05d}-of-00004.safetensors": weights for k in (1, 2)})
        hub_repo(hub, f"org/model-{i:03d}", {f"{i:040x}": files}, main=f"{i:040x}")
    small_model(os.path.join(root, "other-model"))
    os.makedirs(os.path.join(root, "runs", "checkpoint-100"))
    w = walk.walk(root)
    items = tuple(Item("item:" + os.path.relpath(p, root), p, None, d, s) for p, d, s in w.top)
    return items, w.dirs


@pytest.fixture
def side_by_side(monkeypatch):
    monkeypatch.setattr(sidebyside, "MIN_ENTRIES", 0)     # side by side even on a small tree
    taken: list[str] = []
    real_get = sidebyside._Received.get

    def get(self, path):
        got = real_get(self, path)
        if got is not None:
            taken.append(path)
        return got

    monkeypatch.setattr(sidebyside._Received, "get", get)
    return taken


FULL = explore.ITEM_ENTRIES


@pytest.mark.parametrize("item_entries", [FULL, 300, 150])
def test_split_gives_what_one_process_gives(tmp_path, monkeypatch, side_by_side,
                                            item_entries):
    # 300 and 150: the hub's entry budget runs out among the subdirectories the child looked at
    monkeypatch.setattr(explore, "ITEM_ENTRIES", item_entries)
    items, dirs = hub_volume(str(tmp_path / "vol"))
    one = annotate(items, dirs, parallel=False)
    two = annotate(items, dirs, parallel=True)
    assert side_by_side                                    # the child's subtrees were taken
    assert two == one
    repos = [i for i in one[0] if i.parent and "models--" in i.path]
    assert repos and all(i.classification.kind == "model" for i in repos)
    if item_entries == FULL:
        assert len(repos) == 40
        assert sum(p.code == "malformed-file" for p in one[1]) == 6
    else:
        assert len(repos) < 40                             # the budget did run out


def test_split_child_failing_costs_only_time(tmp_path, monkeypatch, side_by_side):
    items, dirs = hub_volume(str(tmp_path / "vol"))
    one = annotate(items, dirs, parallel=False)

    def broken(self, it, paths):
        os._exit(3)                                        # the child dies before it reports

    monkeypatch.setattr(explore.Explorer, "subtrees", broken)
    assert annotate(items, dirs, parallel=True) == one
    assert not side_by_side


@pytest.mark.parametrize("parts", [2, 4])
def test_look_ahead_takes_the_later_runs_of_what_the_budget_reaches(tmp_path, monkeypatch,
                                                                    parts):
    from vacate.observing.recognise import dir_stats_lookup

    items, dirs = hub_volume(str(tmp_path / "vol"))
    hub = next(i for i in items if i.path.endswith("hub"))
    ex = explore.Explorer(dir_stats_lookup(dirs))
    look, _ = ex.subdirs(hub.path, explore.base.list_dir(hub.path, explore.Reader()))
    order = [p for p, _ in look]
    assert len(order) == 40
    for budget in (FULL, 300):
        monkeypatch.setattr(explore, "ITEM_ENTRIES", budget)
        reached = [i for i in annotate(items, dirs, parallel=False)[0]
                   if i.parent == hub.path]                 # the repos looked at, in one process
        runs = ex.look_ahead(hub, budget, parts)
        assert len(runs) == parts - 1
        ahead = [p for run in runs for p in run]
        end = order.index(ahead[-1]) + 1
        assert ahead == order[end - len(ahead):end]          # runs of them, in order, ...
        assert end == len(reached) and (end == 40 or budget != FULL)   # ... to the last reached
        share = len(reached) / parts                         # about as many in each
        assert all(share / 2 < len(run) < share * 2 for run in runs)
        assert share / 2 < len(reached) - len(ahead) < share * 2
    assert len(reached) < 40


def test_fewer_processes_when_forking_fails(tmp_path, monkeypatch, side_by_side):
    """The third fork fails (as with EAGAIN at a process limit): two children and this
    process look at everything, and the result is still the one process's."""
    items, dirs = hub_volume(str(tmp_path / "vol"))
    one = annotate(items, dirs, parallel=False)
    real_fork, forks = os.fork, []

    def fork():
        forks.append(1)
        if len(forks) == 3:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real_fork()

    monkeypatch.setattr(os, "fork", fork)
    assert annotate(items, dirs, parallel=True) == one
    assert len(forks) == 3 and side_by_side                # two children's runs were taken


def _cached(path: str) -> bool:
    """The first byte of ``path`` is in the page cache (a read that must not wait: RWF_NOWAIT
    fails with EAGAIN otherwise)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_read_ahead_brings_the_hub_reads_into_the_cache(tmp_path, monkeypatch, side_by_side):
    """Waiting on the disk (``cpu_bound=False``), what looking at the hub's repos reads that
    a walk did not (refs, blob heads) is asked for before anything looks; threads it starts
    to read the links are gone before any fork; and the result is the one process's."""
    import threading

    from vacate.observing.recognise import hub_cache

    items, dirs = hub_volume(str(tmp_path / "vol"))
    hub = tmp_path / "vol" / "hub"
    repos = sorted(str(p) for p in hub.iterdir())
    files = [str(p) for r in repos for sub in ("refs", "blobs")
             for p in (hub / r / sub).iterdir()]
    links = [p for r in repos for p in (hub / r / "snapshots").glob("*/*")]
    os.sync()                                            # (dirty pages stay in the cache)

    def evict() -> list[str]:
        """Out of the page cache. The kernel keeps a page now and then (in one CI run 26 of
        127 stayed through 3 tries): tried 10 times, then, as root, the whole page cache
        dropped (``drop_caches``)."""
        for i in range(11):
            os.sync()
            if i == 10 and os.geteuid() == 0:
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("1")
            else:
                for f in files:
                    fd = os.open(f, os.O_RDONLY)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    os.close(fd)
            out = [f for f in files if not _cached(f)]
            if len(out) == len(files):
                break
            time.sleep(0.02)
        assert len(out) >= 0.9 * len(files)
        return out

    evicted = evict()
    # the repos, and a model that is not one (nothing of it is read ahead)
    assert hub_cache.read_ahead([*repos, str(tmp_path / "vol" / "other-model")]) == \
        len(files) + len(links)
    assert threading.active_count() == 1
    deadline = time.monotonic() + 5                      # (asked for: read in the background)
    while not all(map(_cached, evicted)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(map(_cached, evicted))

    one = annotate(items, dirs, parallel=False)
    asked: list[int] = []
    real = hub_cache.read_ahead
    monkeypatch.setattr(hub_cache, "read_ahead", lambda paths: asked.append(real(paths)))
    evict()
    assert annotate(items, dirs, parallel=True, cpu_bound=True) == one
    assert not asked                                     # cached: nothing asked for
    assert annotate(items, dirs, parallel=True, cpu_bound=False) == one
    assert asked == [len(files) + len(links)] and side_by_side


def test_a_child_sends_its_subtrees_without_waiting_for_the_parent():
    """The pipe a child sends its subtrees down holds what the bench hub's half takes pickled
    (180 kB) without a reader: the parent reads it only when it comes to those subtrees, and
    a child blocked until then would look at nothing meanwhile."""
    r, w = os.pipe()
    try:
        sidebyside._widen(w)
        os.set_blocking(w, False)
        sent = 0
        try:
            while sent < 512 * 1024:
                sent += os.write(w, b"x" * 65536)
        except BlockingIOError:
            pass
        assert sent >= 512 * 1024
    finally:
        os.close(r)
        os.close(w)
