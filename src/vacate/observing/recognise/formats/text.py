"""Small text formats: Git LFS pointers, README front matter, pip freeze, conda exports."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vacate.observing.compat import SLOTS

LFS_HEAD = b"version https://git-lfs.github.com/spec/v1"


@dataclass(frozen=True, **SLOTS)
class LfsPointer:
    """A Git LFS pointer file: the object id and size of the data it stands for."""
    oid: str
    size: int


def lfs_pointer(data: bytes) -> LfsPointer | None:
    """A Git LFS pointer file (what a clone without git-lfs leaves instead of the data)."""
    if not data.startswith(LFS_HEAD) or len(data) > 1024:
        return None
    oid, size = "", -1
    for line in data.decode("utf-8", "replace").splitlines():
        k, _, v = line.partition(" ")
        if k == "oid":
            oid = v.strip()
        elif k == "size" and v.strip().isdigit():
            size = int(v)
    return LfsPointer(oid, size) if oid else None


def front_matter(text: str) -> dict[str, list[str] | str]:
    """The YAML front matter of a model card, as far as the flat keys and string lists go
    (``base_model``, ``license``, ``tags``, ...). Not a YAML parser: enough for model cards."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    out: dict[str, list[str] | str] = {}
    key = None
    for line in lines[1:200]:
        if line.strip() == "---":
            break
        m = re.match(r"^([A-Za-z_][\w-]*):\s*(.*)$", line)
        if m:
            key, val = m.group(1), m.group(2).strip().strip("'\"")
            if val.startswith("[") and val.endswith("]"):
                out[key] = [v.strip().strip("'\"") for v in val[1:-1].split(",") if v.strip()]
            else:
                out[key] = val if val else []
        elif key and re.match(r"^\s*-\s+", line) and isinstance(out.get(key), list):
            out[key].append(line.split("-", 1)[1].strip().strip("'\""))
    return out


_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*"
                  r"(==|>=|<=|~=|!=|===|>|<| @ )\s*(\S+)")
_CUDA_LOCAL = re.compile(r"\+cu(\d{2,3})\b")
_CUDA_NAME = re.compile(r"-cu(\d{2,3})$")


@dataclass(frozen=True, **SLOTS)
class Requirements:
    """A pip freeze or requirements file: its packages and CUDA flavours."""
    packages: dict[str, str]     # name -> version (or spec)
    lines: int                   # non-empty, non-comment lines
    cuda: tuple[str, ...]        # CUDA flavours seen: "12.8", "13.0"
    torch: str | None

    @property
    def ratio(self) -> float:
        return len(self.packages) / self.lines if self.lines else 0.0


def requirements(text: str) -> Requirements:
    """A ``pip freeze`` or requirements file: packages, and the CUDA flavour the pins imply."""
    pkgs: dict[str, str] = {}
    lines = 0
    local: set[str] = set()      # +cu128 local versions: the exact CUDA build
    named: set[str] = set()      # -cu12 package names: only the major version
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        lines += 1
        if line.startswith(("-e ", "--", "-r ", "-c ", "-i ")):
            pkgs[line] = ""
            continue
        m = _REQ.match(line)
        if not m:
            continue
        name, ver = m.group(1), m.group(3)
        pkgs[name.lower().replace("_", "-")] = ver
        for rx, s, into in ((_CUDA_LOCAL, ver, local), (_CUDA_NAME, name, named)):
            c = rx.search(s)
            if c:
                into.add(_cuda_version(c.group(1)))
    torch = pkgs.get("torch")
    return Requirements(pkgs, lines, tuple(sorted(local or named)), torch)


def _cuda_version(digits: str) -> str:
    # cu128 -> 12.8, cu130 -> 13.0, cu13 -> 13, cu92 -> 9.2
    if len(digits) == 3:
        return f"{digits[:2]}.{digits[2]}"
    if digits.startswith("1"):
        return digits
    return f"{digits[0]}.{digits[1]}"


def conda_export(text: str) -> tuple[str | None, int] | None:
    """A ``conda env export`` YAML: (env name, number of dependencies) or None."""
    if not re.search(r"^dependencies:\s*$", text, re.MULTILINE):
        return None
    m = re.search(r"^name:\s*(\S+)", text, re.MULTILINE)
    deps = len(re.findall(r"^\s+-\s+\S", text, re.MULTILINE))
    return (m.group(1) if m else None), deps


def pyvenv_cfg(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out
