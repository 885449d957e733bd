"""Installers: CUDA toolkit and NVIDIA driver runfiles, cuDNN / NCCL / TensorRT archives,
conda installers, .deb, .rpm and wheels, with where each can be downloaded again."""

from __future__ import annotations

import re

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, dirs, files

CUDA_RUN = re.compile(r"^cuda_(?P<ver>\d+\.\d+(?:\.\d+)?)_(?P<drv>\d+\.\d+(?:\.\d+)?)"
                      r"_(?P<plat>linux(?:_sbsa|_ppc64le|_aarch64)?)\.run$")
DRIVER_RUN = re.compile(r"^NVIDIA-Linux-(?P<arch>x86_64|aarch64)-(?P<ver>\d+\.\d+(?:\.\d+)?)"
                        r"(?P<flav>-no-compat32|-grid)?\.run$")
CUDNN = re.compile(r"^cudnn-linux-(?P<arch>\w+)-(?P<ver>[\d.]+)_cuda(?P<cuda>\d+)-archive\."
                   r"tar\.xz$")
NCCL = re.compile(r"^nccl_(?P<ver>[\d.-]+)\+cuda(?P<cuda>[\d.]+)_(?P<arch>\w+)\.txz$")
TENSORRT = re.compile(r"^TensorRT-(?P<ver>[\d.]+)\..*\.tar\.gz$")
CONDA = re.compile(r"^(?P<dist>Miniforge3|Mambaforge|Miniconda3|Anaconda3|Miniforge-pypy3)"
                   r"-(?P<ver>[\w.-]+?)?-?Linux-(?P<arch>\w+)\.sh$")
WHEEL = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<ver>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-"
                   r"(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")
DEB = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]+)_(?P<ver>[^_]+)_(?P<arch>[a-z0-9]+)\.deb$")
RPM = re.compile(r"^(?P<name>.+)-(?P<ver>[^-]+)-(?P<rel>[^-]+)\.(?P<arch>\w+)\.rpm$")


def _makeself(ctx: Ctx) -> bool:
    head = ctx.head(16 * 1024) or b""
    return head.startswith(b"#!") and (b"Makeself" in head or b"makeself" in head)


@files
def installer(ctx: Ctx) -> Classification | None:
    n = ctx.name
    m = CUDA_RUN.match(n)
    if m:
        real = _makeself(ctx)
        url = (f"https://developer.download.nvidia.com/compute/cuda/{m['ver']}"
               f"/local_installers/{n}")
        arch = {"linux": "x86_64", "linux_sbsa": "arm64-sbsa"}.get(m["plat"], m["plat"])
        return cls("installer", f"CUDA Toolkit {m['ver']} runfile installer (bundles driver "
                   f"{m['drv']}, {arch})" + ("" if real else " (by name only)"),
                   recoverable="re-downloadable", source=url, confidence=0.95 if real else 0.6,
                   guess=not real, evidence=("file name",) + (("makeself header",) if real
                                                             else ()),
                   product="CUDA Toolkit", version=m["ver"], driver_version=m["drv"],
                   platform=arch)
    m = DRIVER_RUN.match(n)
    if m:
        real = _makeself(ctx)
        return cls("installer", f"NVIDIA driver {m['ver']} runfile ({m['arch']})",
                   recoverable="re-downloadable",
                   source=f"https://download.nvidia.com/XFree86/Linux-{m['arch']}/{m['ver']}/{n}",
                   confidence=0.95 if real else 0.6, guess=not real, evidence=("file name",),
                   product="NVIDIA driver", version=m["ver"])
    for rx, prod, url in (
            (CUDNN, "cuDNN",
             "https://developer.download.nvidia.com/compute/cudnn/redist/cudnn/linux-{arch}/{n}"),
            (NCCL, "NCCL", "https://developer.nvidia.com/nccl (login required): {n}"),
            (TENSORRT, "TensorRT", "https://developer.nvidia.com/tensorrt (login required): {n}")):
        m = rx.match(n)
        if m:
            g = m.groupdict()
            cuda = f" for CUDA {g['cuda']}" if g.get("cuda") else ""
            return cls("installer", f"{prod} {g['ver']}{cuda} archive",
                       recoverable="re-downloadable", source=url.format(n=n, **g),
                       confidence=0.8, guess=True, evidence=("file name",), product=prod,
                       version=g["ver"], cuda=g.get("cuda"))
    m = CONDA.match(n)
    if m:
        dist = m["dist"]
        base = ("https://github.com/conda-forge/miniforge/releases" if "forge" in dist.lower()
                else "https://repo.anaconda.com/" + ("archive" if dist == "Anaconda3"
                                                     else "miniconda"))
        return cls("installer", f"{dist} installer {m['ver'] or ''} ({m['arch']})".replace(
            "  ", " "), recoverable="re-downloadable", source=f"{base}/{n}", confidence=0.85,
            guess=True, evidence=("file name",), product=dist, version=m["ver"])
    m = WHEEL.match(n)
    if m:
        head = ctx.head(4) or b""
        ok = head == b"PK\x03\x04"
        local = "+" in m["ver"]
        name = m["name"].replace("_", "-")
        return cls("installer", f"Python wheel {name} {m['ver']} ({m['plat']})",
                   recoverable="re-downloadable" if not local else None,
                   source=f"pypi:{name}=={m['ver']}" if not local else None,
                   confidence=0.85 if ok else 0.5, guess=True, evidence=("file name",),
                   product=name, version=m["ver"],
                   note="local version: built elsewhere, not on PyPI" if local else None)
    for rx, kind, magic in ((DEB, "Debian package", b"!<arch>\n"),
                            (RPM, "RPM package", b"\xed\xab\xee\xdb")):
        m = rx.match(n)
        if m:
            head = ctx.head(8) or b""
            ok = head.startswith(magic)
            return cls("installer", f"{kind} {m['name']} {m['ver']} ({m['arch']})",
                       recoverable="re-downloadable", guess=True,
                       source=f"{'apt' if kind.startswith('Debian') else 'rpm'}:{m['name']}"
                              f"={m['ver']}", confidence=0.85 if ok else 0.5,
                       evidence=("file name",) + (("archive magic",) if ok else ()),
                       product=m["name"], version=m["ver"])
    return None


PACKAGE_EXT = {".whl": "Python wheels", ".deb": "Debian packages", ".rpm": "RPM packages",
               ".run": "runfile installers", ".tar.gz": "source archives"}


@dirs
def package_dir(ctx: Ctx) -> Classification | None:
    """A directory of packages: a wheelhouse, a local mirror, an apt archive cache."""
    lst = ctx.listing()
    by: dict[str, list] = {}
    for f in lst.files.values():
        if f.ext in PACKAGE_EXT:
            by.setdefault(f.ext, []).append(f)
    if not by:
        return None
    ext, pkgs = max(by.items(), key=lambda kv: sum(f.size for f in kv[1]))
    total = sum(f.size for f in lst.files.values()) or 1
    if len(pkgs) < 3 or sum(f.size for f in pkgs) < 0.6 * total or ext == ".tar.gz":
        return None
    local = [f.name for f in pkgs if ext == ".whl" and "+" in f.name]
    more = " (more not listed)" if lst.truncated else ""
    return cls("installer", f"directory of {len(pkgs)} {PACKAGE_EXT[ext]}{more}, "
               f"{human_bytes(ctx.stats.apparent_bytes)}",
               recoverable=None if local or ext == ".run" else "re-downloadable",
               source={".whl": "pypi", ".deb": "apt", ".rpm": "rpm"}.get(ext), guess=True,
               confidence=0.8, evidence=(f"{len(pkgs)} *{ext} files",), packages=len(pkgs),
               format=ext[1:], local_builds=local[:20] or None)
