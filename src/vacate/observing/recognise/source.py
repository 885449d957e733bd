"""Source checkouts: git work trees, with the remote URL (credentials redacted), the branch,
and whether HEAD is on the remote (then the committed state can be cloned again)."""

from __future__ import annotations

import os
import re

from vacate.observing.human import human_bytes
from vacate.observing.model.inventory import Classification
from vacate.observing.parsers.redact import redact_text
from vacate.observing.recognise.base import Ctx, cls, dirs

KNOWN = {"specforge": "SpecForge", "sglang": "SGLang", "vllm": "vLLM", "eagle": "EAGLE",
         "transformers": "transformers", "llama.cpp": "llama.cpp", "megatron-lm": "Megatron-LM",
         "tensorrt-llm": "TensorRT-LLM", "deepspeed": "DeepSpeed", "medusa": "Medusa"}


def parse_git_config(text: str) -> dict[str, str]:
    """remote name -> url."""
    remotes: dict[str, str] = {}
    section = None
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r'^\[remote\s+"([^"]+)"\]$', s)
        if m:
            section = m.group(1)
        elif s.startswith("["):
            section = None
        elif section and s.partition("=")[0].strip() == "url":
            remotes[section] = s.partition("=")[2].strip()
    return remotes


def _ref(ctx: Ctx, gitdir: str, ref: str) -> str | None:
    h = ctx.reader.head(os.path.join(gitdir, *ref.split("/")), 64, quiet=True)
    if h:
        return h.decode("ascii", "replace").strip()
    packed = ctx.reader.text(os.path.join(gitdir, "packed-refs"), 4 * 1024 * 1024) or ""
    for line in packed.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == ref:
            return parts[0]
    return None


@dirs
def git_checkout(ctx: Ctx) -> Classification | None:
    lst = ctx.listing()
    if ".git" in lst.files and not lst.files[".git"].is_link:
        # A linked worktree or a submodule: .git is a file naming the real git directory.
        text = ctx.reader.text(ctx.join(".git"), 4096) or ""
        where = text.partition("gitdir:")[2].strip()
        return cls("source-code", f"git worktree/submodule checkout (git dir {where or '?'}), "
                   f"{human_bytes(ctx.stats.apparent_bytes)}", confidence=0.8,
                   evidence=(".git file",), gitdir=where or None)
    if ".git" not in lst.dirs:
        return None
    gitdir = ctx.join(".git")
    if not os.path.isfile(os.path.join(gitdir, "HEAD")):
        return None
    remotes = parse_git_config(ctx.reader.text(os.path.join(gitdir, "config"), 256 * 1024) or "")
    head = (ctx.reader.head(os.path.join(gitdir, "HEAD"), 256) or b"").decode(
        "utf-8", "replace").strip()
    branch = head[len("ref: refs/heads/"):] if head.startswith("ref: refs/heads/") else None
    commit = _ref(ctx, gitdir, f"refs/heads/{branch}") if branch else head[:40]
    url = redact_text(remotes.get("origin") or next(iter(remotes.values()), "")) or None
    pushed = None
    if url and branch and commit:
        pushed = _ref(ctx, gitdir, f"refs/remotes/origin/{branch}") == commit
    name = re.sub(r"\.git$", "", (url or ctx.name).rstrip("/").rsplit("/", 1)[-1])
    project = KNOWN.get(name.lower(), name)
    where = re.sub(r"^(https?://|git@)", "", url or "").replace(":", "/", 1) if url else None
    label = f"{project} checkout" + (f" ({where})" if where else " (no remote)") + (
        f", branch {branch}" if branch else ", detached HEAD") + (
        "" if pushed is None else (", HEAD pushed" if pushed else ", HEAD not on the remote")) \
        + f", {human_bytes(ctx.stats.apparent_bytes)}"
    return cls("source-code", label,
               recoverable="re-downloadable" if pushed else ("unique" if url is None or
                                                             pushed is False else None),
               source=url if pushed else None, confidence=0.95, evidence=(".git/",),
               project=project, remote=url, branch=branch, commit=commit, head_pushed=pushed,
               note="uncommitted changes are not checked" if pushed else None)
