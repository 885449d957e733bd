"""GPUs held by holder processes: ``/dev/nvidiaN`` fds (found by the /proc pass) and, when
``nvidia-ml-py`` is importable, NVML's per-process view (GPU name, UUID, memory in use).

``nvml`` is any object with pynvml's functions (``nvmlInit``, ``nvmlDeviceGetCount``,
``nvmlDeviceGetHandleByIndex``, ``nvmlDeviceGetName``, ``nvmlDeviceGetUUID``,
``nvmlDeviceGetComputeRunningProcesses``, ``nvmlDeviceGetGraphicsRunningProcesses``,
``nvmlShutdown``): the ``pynvml`` module itself, or a fake in tests. Standard library only;
pynvml is imported lazily and only when some holder has an NVIDIA device open.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

from vacate.observing.compat import SLOTS
from vacate.observing.model.usage import Consumer


@dataclass(frozen=True, **SLOTS)
class GpuUse:
    """A GPU a process holds, as NVML names it (or only its index)."""
    index: int
    name: str | None
    uuid: str | None
    memory_bytes: int | None


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def load_nvml():
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    return pynvml


def nvml_usage(nvml) -> tuple[dict[int, list[GpuUse]], str | None]:
    """pid -> the GPUs NVML says it uses; and an error text when NVML could not be asked."""
    out: dict[int, list[GpuUse]] = {}
    errors = (getattr(nvml, "NVMLError", OSError), OSError)   # pynvml raises NVMLError_*
    try:
        nvml.nvmlInit()
    except errors as e:   # NVMLError_LibraryNotFound, driver not loaded, ...
        return out, f"NVML unavailable: {e}"
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(nvml.nvmlDeviceGetName(h))
            uuid = _text(nvml.nvmlDeviceGetUUID(h))
            procs = list(nvml.nvmlDeviceGetComputeRunningProcesses(h))
            with contextlib.suppress(*errors):
                procs += list(nvml.nvmlDeviceGetGraphicsRunningProcesses(h))
            for pr in procs:
                mem = getattr(pr, "usedGpuMemory", None)
                out.setdefault(int(pr.pid), []).append(
                    GpuUse(i, name, uuid, int(mem) if isinstance(mem, int) else None))
    except errors as e:
        return out, f"NVML query failed: {e}"
    finally:
        with contextlib.suppress(*errors):
            nvml.nvmlShutdown()
    return out, None


def annotate(consumers: tuple[Consumer, ...], nvml=None) -> tuple[Consumer, ...]:
    """Add NVML's names and memory to the ``gpus`` of process consumers holding NVIDIA fds."""
    nvml = nvml if nvml is not None else load_nvml()
    if nvml is None:
        return consumers
    usage, err = nvml_usage(nvml)
    out = []
    for c in consumers:
        if c.type != "process" or not c.attrs.gpus:
            out.append(c)
            continue
        by_index = {g.index: g for g in usage.get(c.attrs.pid, [])}
        gpus = []
        for g in c.attrs.gpus:
            d = dict(g)
            u = by_index.pop(d["index"], None)
            if u is not None:
                d.update(name=u.name, uuid=u.uuid, memory_bytes=u.memory_bytes)
            gpus.append(d)
        for u in by_index.values():    # NVML knows of a GPU with no device fd seen
            gpus.append({"device": None, "index": u.index, "name": u.name, "uuid": u.uuid,
                         "memory_bytes": u.memory_bytes})
        attrs = c.attrs.updated(gpus=gpus, gpu_note=err) if err else c.attrs.updated(gpus=gpus)
        out.append(replace(c, attrs=attrs))
    return tuple(out)
