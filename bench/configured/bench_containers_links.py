"""Configured users II: vacate's lxc, pve, docker and symlink sources against the hand-run
way (`grep -rlE '/data(/|$|...)'` over the container configs plus `find ROOTS -type l -lname
'/data*'`) on a captured tree, interleaved runs.

The tree: /etc/pve with storage.cfg and 400 container configs (copies of the real fixtures,
renumbered), 100 LXC containers, 100 docker containers, and this host's /etc copied in for the
symlink search, plus planted users of the volume /data (a ZFS dataset
scratch/subvol-129-disk-0, also bind-mounted at /srv/models). Which configs really use it is
known; the script counts what each side finds and its false positives.

    python3 bench/configured/bench_containers_links.py [--runs 9]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from vacate.observing.collectors.configured import docker, lxc, pve, symlinks
from vacate.observing.collectors.configured.match import host_view
from vacate.observing.host import Host
from vacate.observing.model.mount import Mount, Target

HERE = os.path.dirname(os.path.abspath(__file__))
PX = os.path.join(HERE, "..", "..", "tests", "fixtures", "proxmox")
GREP = r"/data(/|$|[^A-Za-z0-9_])"
LINK_ROOTS = ("etc", "opt", "srv", "usr/local", "root", "home")


def target() -> Target:
    m = Mount(10, 1, 0, 51, "/", "/data", ("rw",), (), "zfs", "scratch/subvol-129-disk-0", ())
    bind = Mount(11, 1, 0, 51, "/models", "/srv/models", ("rw",), (), "zfs",
                 "scratch/subvol-129-disk-0", ())
    return Target("/data", m, 0, None, None, None, True, "", "scratch/subvol-129-disk-0", (),
                  (bind,))


def write(root: str, rel: str, text: str) -> None:
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)


def link(root: str, rel: str, dest: str) -> None:
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    os.symlink(dest, p)


def build(root: str) -> dict[str, set[str]]:
    """The tree; returns the consumer ids that really use /data, per source."""
    truth: dict[str, set[str]] = {"pve": set(), "lxc": set(), "docker": set(), "links": set()}
    with open(os.path.join(PX, "pve-docs-storage.cfg")) as f:
        storage = f.read()
    write(root, "etc/pve/storage.cfg", storage + "\nzfspool: scratch\n\tpool scratch\n"
          "\tcontent rootdir,images\n")
    reals = sorted(n for n in os.listdir(PX) if n.endswith(".conf"))
    for i in range(400):
        vmid = 1000 + i
        with open(os.path.join(PX, reals[i % len(reals)])) as f:
            text = f.read()
        extra = ""
        if i < 10:          # the story: a volume id that resolves to the dataset
            extra = f"mp9: scratch:subvol-129-disk-0,mp=/mnt/scratch{i}\n"
        elif i < 15:        # a bind of a path on it
            extra = f"mp9: /data/models/m{i},mp=/models\n"
        elif i < 20:        # a bind through the other mount of the same filesystem
            extra = f"mp9: /srv/models/m{i},mp=/models\n"
        elif i < 25:        # decoys: /database, and /data only inside the container
            extra = "mp9: /database,mp=/db\n" if i < 22 else \
                "mp9: local:100/vm-100-disk-0.raw,mp=/data\n"
        if i < 20:
            truth["pve"].add(f"pve-container:{vmid}")
        head, sep, snaps = text.partition("\n[")
        write(root, f"etc/pve/lxc/{vmid}.conf", head.rstrip("\n") + "\n" + extra
              + (sep + snaps if sep else ""))
    for i in range(100):
        name = f"ct{i}"
        lines = [f"lxc.uts.name = {name}", f"lxc.rootfs.path = dir:/var/lib/lxc/{name}/rootfs",
                 "lxc.include = /usr/share/lxc/config/common.conf"]
        if i < 10:
            lines.append(f"lxc.mount.entry = /data/work/{i} srv/work none bind,create=dir 0 0")
        elif i < 15:
            lines.append(f"lxc.mount.entry = /srv/models/{i} srv/m none bind,create=dir 0 0")
        elif i < 20:
            lines.append(f"lxc.rootfs.path = zfs:scratch/subvol-129-disk-0/ct{i}")
        elif i < 23:
            lines.append("lxc.mount.entry = /database srv/db none bind 0 0")
        if i < 20:
            truth["lxc"].add(f"lxc-container:{name}")
        write(root, f"var/lib/lxc/{name}/config", "\n".join(lines) + "\n")
    for i in range(100):
        cid = f"{i:064x}"
        binds = [f"/data/cache/{i}:/cache"] if i < 10 else \
            [f"/srv/models/{i}:/m:ro"] if i < 15 else ["/var/tmp:/tmp"]
        if i < 15:
            truth["docker"].add(f"docker-container:c{i}")
        mps = {b.split(":")[1]: {"Source": b.split(":")[0], "Destination": b.split(":")[1],
                                 "RW": True, "Type": "bind"} for b in binds}
        write(root, f"var/lib/docker/containers/{cid}/config.v2.json", json.dumps(
            {"ID": cid, "Name": f"/c{i}", "Config": {"Image": "img", "Env": ["PATH=/usr/bin"]},
             "State": {"Running": False, "StartedAt": "0001-01-01T00:00:00Z"},
             "MountPoints": mps}))
        write(root, f"var/lib/docker/containers/{cid}/hostconfig.json",
              json.dumps({"Binds": binds, "RestartPolicy": {"Name": "no"}}))
    # symlinks: this host's /etc, and planted links
    shutil.copytree("/etc", os.path.join(root, "etc"), symlinks=True, dirs_exist_ok=True,
                    ignore_dangling_symlinks=True)
    for i in range(5):
        link(root, f"opt/app{i}/data", f"/data/models/m{i}")                    # absolute
        link(root, f"home/u{i}/.cache/huggingface", f"../../../data/hf{i}")   # relative
        link(root, f"usr/local/bin/tool{i}", f"/srv/chain{i}")                 # chain ...
        link(root, f"srv/chain{i}", f"/data/bin/tool{i}")                      # ... into it
        link(root, f"etc/model{i}", f"/srv/models/m{i}")                       # bind spelling
        link(root, f"etc/db{i}", "/database")                                  # decoy
        truth["links"] |= {f"symlink:/opt/app{i}/data", f"symlink:/home/u{i}/.cache/huggingface",
                           f"symlink:/usr/local/bin/tool{i}", f"symlink:/srv/chain{i}",
                           f"symlink:/etc/model{i}"}
    return truth


PER_SOURCE: dict[str, list[float]] = {}


def run_vacate(root: str) -> tuple[float, dict[str, set[str]]]:
    t0 = time.perf_counter()
    host = Host.under(root)
    tgt = target()
    view = host_view(tgt)
    found = {}
    for key, mod in (("pve", pve), ("lxc", lxc), ("docker", docker), ("links", symlinks)):
        t1 = time.perf_counter()
        cs, _ = mod.collect(host, tgt, view)
        PER_SOURCE.setdefault(key, []).append(time.perf_counter() - t1)
        found[key] = {c.id for c in cs}
    return time.perf_counter() - t0, found


def run_peers(root: str) -> tuple[float, dict[str, set[str]]]:
    dirs = [os.path.join(root, d) for d in ("etc/pve", "var/lib/lxc", "var/lib/docker/containers")]
    t0 = time.perf_counter()
    g = subprocess.run(["grep", "-rlE", GREP, *dirs], capture_output=True, text=True, check=False)
    f = subprocess.run(["find", *[os.path.join(root, d) for d in LINK_ROOTS], "-type", "l",
                        "(", "-lname", "/data", "-o", "-lname", "/data/*", ")"],
                       capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t0
    found: dict[str, set[str]] = {"pve": set(), "lxc": set(), "docker": set(), "links": set()}
    for p in g.stdout.split():
        rel = "/" + os.path.relpath(p, root)
        if m := re.match(r"^/etc/pve/lxc/(\d+)\.conf$", rel):
            found["pve"].add(f"pve-container:{m.group(1)}")
        elif m := re.match(r"^/var/lib/lxc/([^/]+)/", rel):
            found["lxc"].add(f"lxc-container:{m.group(1)}")
        elif m := re.match(r"^/var/lib/docker/containers/([0-9a-f]+)/", rel):
            found["docker"].add(f"docker-container:c{int(m.group(1), 16)}")
    for p in f.stdout.split():
        found["links"].add("symlink:/" + os.path.relpath(p, root))
    return dt, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="vacate-bench-cfg-")
    try:
        truth = build(root)
        tv, tp = [], []
        fv = fp = None
        for _ in range(args.runs):          # interleaved
            dt, fv = run_vacate(root)
            tv.append(dt)
            dt, fp = run_peers(root)
            tp.append(dt)
        mv, mp = statistics.median(tv), statistics.median(tp)
        print(f"vacate lxc+pve+docker+symlinks (in-process): median {mv * 1000:.1f} ms")
        print(f"grep -rlE + find -lname (2 processes):      median {mp * 1000:.1f} ms")
        print(f"ratio vacate/peers: {mv / mp:.2f}")
        print("vacate per source, median ms: " + ", ".join(
            f"{k} {statistics.median(v) * 1000:.1f}" for k, v in PER_SOURCE.items()))
        print(f"{'source':8} {'truth':>5} {'vacate':>7} {'v.false+':>8} {'peers':>6} {'p.false+':>8}")
        for k in truth:
            t = truth[k]
            print(f"{k:8} {len(t):5} {len(fv[k] & t):7} {len(fv[k] - t):8} "
                  f"{len(fp[k] & t):6} {len(fp[k] - t):8}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
