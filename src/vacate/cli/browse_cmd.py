"""``vacate browse [PATH | OBSERVATION | PLAN]``: the volume as ncdu shows it, with what each
entry is and what uses it, and the plan made by marking entries (``w`` writes it through
the planner ``vacate plan`` uses). Never applies anything.

On a PATH it observes first (the screen shows that it does); a saved observation or plan is
browsed without touching the machine until a plan is written."""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex

from vacate import remote
from vacate.cli import paths
from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK, UsageError, VacateError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("browse", help="look at the volume as ncdu does, with what each part is "
                                      "and what uses it, and mark entries to make a plan")
    p.add_argument("source", nargs="?", default=".",
                   help="the volume's mount point (observed first), a saved observation "
                        "(vacate observe -o) or a plan (vacate plan -o); default: .")
    p.add_argument("--archive-to", metavar="DEST",
                   help="where archived items go, for the plan written (as vacate plan)")
    p.add_argument("-o", "--output", metavar="PLAN", type=paths.writable_file,
                   help="the plan file w writes")
    remote.add_arguments(p, "a stall exits 3 before anything is shown")
    return p


def _schema(path: str) -> str | None:
    """The ``schema`` of a vacate JSON document, or None when ``path`` is not one."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    i = head.find(b'"schema"')
    if i < 0:
        return None
    try:
        rest = head[i + 8:].split(b'"', 2)
        return rest[1].decode("ascii")
    except (IndexError, UnicodeDecodeError):
        return None


def _load_plan(path: str):
    from vacate.observing.model.codec import Malformed
    from vacate.observing.model.plan import Plan

    with open(path, "rb") as f:
        raw = f.read()
    try:
        return Plan.loads(raw.decode("ascii", "surrogateescape"))
    except (Malformed, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: {e}") from None


def _files_beside(observation: str):
    """The full file listing beside a saved observation (``vacate observe --files``) when
    it is there and is that observation's; what to say when one is there but not used."""
    from vacate.output import files_listing

    path = files_listing.beside(observation)
    if not os.path.exists(path):
        return None, ""
    with open(observation, "rb") as f:
        sha = files_listing.digest(f.read())
    try:
        return files_listing.Listing(path, sha), ""
    except VacateError as e:
        return None, f"{e.message}: directories show their files as counts"


def run(args, env: Env) -> int:
    """(The volume, once made, is frozen out of the collector's full passes: it lives as
    long as the app, and a full pass over its million objects, whenever a directory of
    many files is read, costs ~50 ms.)"""
    src = args.source
    if not os.path.isdir(src) and getattr(args, "remote", None) is None \
            and getattr(args, "ct", None) is None:
        try:                  # a saved observation or plan: said wrong before anything else
            paths.readable_file(src)
        except argparse.ArgumentTypeError as e:
            raise UsageError(f"{e}", hint="browse a mount point, a saved observation (vacate "
                             "observe -o FILE) or a plan (vacate plan -o FILE)") from None
    from vacate.browse.model import Volume

    plan_file = None
    load = None
    volume = None
    said = ""
    if os.path.isfile(src):
        schema = _schema(src) or ""
        if schema.startswith("vacate.plan/"):
            plan = _load_plan(src)
            plan_file = src
            volume = Volume(plan.observation, plan=plan)
        elif schema.startswith("vacate.observation/"):
            from vacate.cli.saved import load_observation

            files, said = _files_beside(src)
            volume = Volume(load_observation(src, env), archive_to=args.archive_to,
                            files=files)
        else:
            raise UsageError(f"{src} is neither a vacate observation nor a plan",
                             hint="vacate observe PATH -o FILE, or vacate plan PATH -o FILE")
    else:
        here = getattr(args, "remote", None) is None and getattr(args, "ct", None) is None

        def load():
            if here:         # observed here: the walk's record lists every file
                from vacate.observing.observe import observe
                from vacate.output.files_listing import FromWalk

                obs = observe(src, host=env.host, record_tree=True)
                vol = Volume(obs, archive_to=args.archive_to,
                             files=FromWalk(obs.inventory.listing))
            else:
                with remote.reach(args, env.host) as where:
                    vol = Volume(where.observe(src), archive_to=args.archive_to)
            gc.freeze()
            return vol

    if plan_file and args.archive_to:
        raise UsageError("a plan keeps its own --archive-to: browse it without one")
    if not (env.stdout_isatty and env.stdin_isatty):
        raise UsageError("vacate browse is a full-screen terminal program, and there is no "
                         "terminal here",
                         hint="without one: vacate scan PATH, vacate check PATH, "
                              "vacate plan PATH --json")
    from vacate.browse.app import Browse
    from vacate.browse.write import Writer

    writer = Writer(lambda: remote.reach(args, env.host), args.output, source=plan_file,
                    remote=getattr(args, "remote", None), ct=getattr(args, "ct", None))
    if volume is not None:
        gc.freeze()
    app = Browse(volume, load=load, writer=writer, what=src)
    app.message = said
    try:
        got = app.run()
    finally:
        listed = app.vol.listed if app.vol is not None else None
        if listed is not None:
            listed.close()
    if isinstance(got, VacateError):
        raise got
    if isinstance(got, Exception):
        raise VacateError(f"observing {src} failed: {got}")
    said_after(app.written, env)
    return EXIT_OK


def said_after(written: tuple[str, str] | None, env: Env) -> None:
    """Once the screen is gone: the plan written and the command that makes it, each on a
    line of its own, to be copied whole from the terminal."""
    if written is None:
        return
    path, command = written
    prose, _, rest = command.rpartition("vacate plan ")
    if prose:
        command = f"{prose.rstrip()}\nvacate plan {rest}"
    env.stdout.write(f"plan written to {path}; the same plan in a script:\n{command}\n"
                     f"review it, then: vacate apply {shlex.quote(path)}\n")
