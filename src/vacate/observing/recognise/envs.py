"""Environments: pip freeze / requirements files (with the CUDA flavour their pins imply),
conda env exports, venvs (pyvenv.cfg) and conda environments (conda-meta)."""

from __future__ import annotations

import re

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, dirs, files, list_dir
from vacate.observing.recognise.formats.text import conda_export, pyvenv_cfg, requirements

TEXTY = re.compile(r"(\.txt|\.in|\.lock|\.pip|freeze|requirements|constraints)$", re.IGNORECASE)
DIST = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<ver>[^-]+)\.dist-info$")


def _cuda_phrase(cudas: tuple[str, ...], torch: str | None) -> str:
    if not cudas:
        return ""
    s = ", CUDA " + "/".join(cudas)
    return s + (f" (torch {torch})" if torch else "")


@files
def pip_freeze(ctx: Ctx) -> Classification | None:
    if not TEXTY.search(ctx.name) or ctx.stats.apparent_bytes > 1024 * 1024 \
            or ctx.stats.apparent_bytes == 0:
        return None
    text = ctx.reader.text(ctx.path, 1024 * 1024)
    if not text or "\x00" in text[:4096]:
        return None
    r = requirements(text)
    if len(r.packages) < 3 or r.ratio < 0.8:
        return None
    pinned = sum(1 for v in r.packages.values() if v and v[0].isdigit())
    frozen = pinned >= 0.9 * len(r.packages)
    what = "pip freeze of an environment" if frozen else "Python requirements file"
    return cls("env-backup", f"{what}, {len(r.packages)} packages"
               + _cuda_phrase(r.cuda, r.torch), recoverable="unique", confidence=0.9,
               evidence=(f"{len(r.packages)} of {r.lines} lines are package pins",),
               packages=len(r.packages), cuda=list(r.cuda) or None, torch=r.torch,
               format="pip-freeze" if frozen else "requirements")


@files
def conda_env_export(ctx: Ctx) -> Classification | None:
    if not ctx.name.endswith((".yml", ".yaml")) or ctx.stats.apparent_bytes > 1024 * 1024:
        return None
    text = ctx.reader.text(ctx.path, 1024 * 1024)
    got = conda_export(text or "")
    if got is None:
        return None
    name, deps = got
    r = requirements("\n".join(ln.strip().lstrip("- ") for ln in (text or "").splitlines()))
    return cls("env-backup", "conda environment export" + (f" '{name}'" if name else "")
               + f", {deps} dependencies" + _cuda_phrase(r.cuda, r.torch),
               recoverable="unique", confidence=0.85, evidence=("dependencies: key",),
               env_name=name, packages=deps, format="conda-export")


def _site_packages(ctx: Ctx) -> tuple[int, str | None]:
    """(number of installed distributions, torch version) from lib/python*/site-packages."""
    lib = list_dir(ctx.join("lib"), ctx.reader)
    n, torch = 0, None
    for py in lib.dirs:
        if not py.startswith("python"):
            continue
        sp = list_dir(ctx.join("lib", py, "site-packages"), ctx.reader)
        for d in sp.dirs:
            m = DIST.match(d)
            if m:
                n += 1
                if m["name"].lower() == "torch":
                    torch = m["ver"]
    return n, torch


@dirs
def venv(ctx: Ctx) -> Classification | None:
    lst = ctx.listing()
    if "pyvenv.cfg" not in lst.files:
        return None
    cfg = pyvenv_cfg(ctx.reader.text(ctx.join("pyvenv.cfg"), 64 * 1024) or "")
    ver = cfg.get("version") or cfg.get("version_info")
    n, torch = _site_packages(ctx)
    cuda = re.search(r"\+cu(\d+)", torch or "")
    label = f"Python {ver or '?'} venv, {n} packages" + (f", torch {torch}" if torch else "") \
        + f", {human_bytes(ctx.stats.apparent_bytes)}"
    return cls("venv", label, recoverable="regenerable", confidence=0.95,
               evidence=("pyvenv.cfg",), python=ver, packages=n, torch=torch,
               cuda=cuda.group(1) if cuda else None, home=cfg.get("home"),
               rebuild_from="pip freeze of its site-packages")


@dirs
def conda_env(ctx: Ctx) -> Classification | None:
    lst = ctx.listing()
    if "conda-meta" not in lst.dirs:
        return None
    meta = list_dir(ctx.join("conda-meta"), ctx.reader)
    pkgs = [n for n in meta.files if n.endswith(".json")]
    py = next((m.group(1) for n in pkgs if (m := re.match(r"^python-(\d+\.\d+[\d.]*)-", n))),
              None)
    base = "condabin" in lst.dirs or "envs" in lst.dirs
    envs = [d for d in list_dir(ctx.join("envs"), ctx.reader).dirs] if "envs" in lst.dirs else []
    what = "conda installation (base)" if base else "conda environment"
    label = f"{what}, python {py or '?'}, {len(pkgs)} packages" + (
        f", {len(envs)} envs" if envs else "") + f", {human_bytes(ctx.stats.apparent_bytes)}"
    return cls("conda-env", label, recoverable="regenerable", confidence=0.95,
               evidence=("conda-meta/",), python=py, packages=len(pkgs), envs=envs[:20] or None)
