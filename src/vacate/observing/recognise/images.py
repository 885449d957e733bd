"""Container images (docker data roots, OCI layouts, Singularity/Apptainer .sif) and VM disk
images (qcow2, vmdk, vdi, vhdx, raw disks with a partition table)."""

from __future__ import annotations

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.recognise.base import Ctx, cls, dirs, files

VM_MAGIC = ((0, b"QFI\xfb", "qcow2"), (0, b"KDMV", "vmdk"), (0, b"vhdxfile", "vhdx"),
            (64, b"\x7f\x10\xda\xbe", "vdi"), (0, b"conectix", "vhd"))
RAW_EXT = (".img", ".raw", ".disk")


@files
def disk_or_container_image(ctx: Ctx) -> Classification | None:
    head = ctx.head(1024) or b""
    size = human_bytes(ctx.stats.apparent_bytes)
    for off, magic, fmt in VM_MAGIC:
        if head[off:off + len(magic)] == magic:
            ver = int.from_bytes(head[4:8], "big") if fmt == "qcow2" else None
            return cls("vm-image", f"{fmt} disk image ({size} virtual or apparent, "
                       f"{human_bytes(ctx.stats.disk_bytes)} on disk)", recoverable="unique",
                       confidence=0.95, evidence=(f"{fmt} magic",), format=fmt,
                       qcow2_version=ver)
    if b"SIF_MAGIC" in head[:64]:
        return cls("container-image", f"Singularity/Apptainer image (.sif), {size}",
                   recoverable=None, confidence=0.95, evidence=("SIF_MAGIC",), format="sif")
    if ctx.name.endswith(RAW_EXT) and len(head) >= 1024:
        if head[512:520] == b"EFI PART":
            pt = "GPT"
        elif head[510:512] == b"\x55\xaa":
            pt = "MBR"
        else:
            return None
        return cls("vm-image", f"raw disk image ({pt} partition table), {size}",
                   recoverable="unique", confidence=0.85, evidence=(f"{pt} signature",),
                   format="raw", partition_table=pt)
    return None


@dirs
def container_dir(ctx: Ctx) -> Classification | None:
    lst = ctx.listing()
    if "oci-layout" in lst.files and "blobs" in lst.dirs:
        return cls("container-image", f"OCI image layout, {human_bytes(ctx.stats.apparent_bytes)}",
                   confidence=0.95, evidence=("oci-layout",), format="oci")
    docker = {"image", "containers", "overlay2", "volumes", "buildkit", "network"}
    if len(docker & set(lst.dirs)) >= 3 and ("image" in lst.dirs or "overlay2" in lst.dirs):
        return cls("container-image", "docker data root (images, containers, volumes), "
                   f"{human_bytes(ctx.stats.apparent_bytes)}", confidence=0.9,
                   evidence=("image/ overlay2/ containers/",), format="docker-root",
                   note="volumes and container layers may hold unique data")
    if "manifest.json" in lst.files and "repositories" in lst.files:
        return cls("container-image", "unpacked `docker save` image", confidence=0.8,
                   evidence=("manifest.json + repositories",), format="docker-save")
    return None
