"""``vacate demo``: build the story's /data as a small real volume and show what vacate says
about it with its commands: scan; check while a stand-in for the story's SGLang server mmaps a
model shard (in use: the blocker and its next action), and again once it has stopped (safe);
then a cold backup of the EAGLE-3 data, verified by reading it back; then the retirement:
the plan made while the server runs again, applied with ``--yes``, and what remains."""

from __future__ import annotations

import argparse

from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK, VacateError

# the commands the demo runs on the volume, in order (then archive and verify)
STEPS: tuple[tuple[str, ...], ...] = (("scan",), ("check",))

# A stand-in for `python -m sglang.launch_server --model-path ...`: it maps one weight shard
# read-only, as the server mmaps the weights (Python's mmap keeps a dup of the fd open too).
_SERVER = ("import mmap,sys,time;f=open(sys.argv[2],'rb');"
           "m=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ);f.close();"
           "print('serving',flush=True);time.sleep(3600)")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("demo", help="build an example /data volume (sparse files standing in "
                                    "for a 234 GB model, 4.8 TB of EAGLE-3 data...) and audit it")
    p.add_argument("--keep", action="store_true",
                   help="leave the volume in place (mounted) and print how to remove it")
    p.add_argument("--dir", metavar="DIR",
                   help="build it as a plain directory DIR/data instead of a loop-mounted image")
    return p


def run(args, env: Env) -> int:
    from vacate import demo
    from vacate.cli import main as cli

    try:
        vol = demo.create(args.dir, loop=False if args.dir else None)
    except (OSError, ValueError) as e:
        raise VacateError(f"cannot build the example volume: {e}",
                          hint="run as root for a loop-mounted image, or pass --dir DIR") from None
    out = env.console()
    status = EXIT_OK
    try:
        out.print(f"[bold]The example /data[/] is a {vol.kind} at [bold]{vol.path}[/]"
                  + (f" ({vol.device}, image {vol.image})" if vol.device else "") + ".")
        out.print("It holds what the story's volume held, as sparse files (real headers, "
                  "holes for the bytes).")
        if not vol.device:
            out.print("[yellow]A plain directory shares its filesystem with the rest of this "
                      "machine, so `check` reports everything that uses that filesystem; run "
                      "as root for a volume of its own.[/]")
        out.print("")
        for step in STEPS:
            if step[0] == "check":
                status = _check_with_server(vol.path, out, env, cli)
                continue
            out.print(f"[bold cyan]$ vacate {' '.join(step)} {vol.path}[/]")
            cli.main([*step, vol.path], env)
            out.print("")
        _backup(vol.path, out, env, cli)
        if vol.device:
            _retire(vol.path, out, env, cli, apply=not args.keep, work=vol.workdir)
        else:
            _plan_only(vol.path, out, env)
    finally:
        if args.keep:
            out.print(f"Kept: {vol.path}. Remove it with:")
            for c in vol.teardown_commands():
                out.print(f"  {c}")
        else:
            problems = vol.close()
            for p in problems:
                print(f"vacate: cleanup: {p}", file=env.stderr)
    # the demo's own success does not depend on the verdict it shows
    return EXIT_OK if status in (0, 1, 3) else status


def _check_with_server(path: str, out, env: Env, cli) -> int:
    """``check`` while the stand-in server maps a shard (not safe: the blocker and what to do),
    then again once it has stopped (safe)."""
    import glob
    import os
    import subprocess
    import sys

    shards = sorted(glob.glob(os.path.join(path, "models", "*", "*.safetensors")))
    server = None
    if shards:
        out.print("[dim]Starting a stand-in for the story's SGLang server: it mmaps "
                  f"{os.path.relpath(shards[0], path)} read-only, as the server maps its weights.[/]")
        server = subprocess.Popen([sys.executable, "-c", _SERVER, "--model-path", shards[0]],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, cwd="/")
        if server.stdout is None or server.stdout.readline().strip() != b"serving":
            server.kill()
            server.wait()
            server = None
    try:
        out.print(f"[bold cyan]$ vacate check {path}[/]")
        rc = cli.main(["check", path], env)
        out.print("")
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    if server is None:
        return rc
    out.print(f"[dim]The stand-in server (pid {server.pid}) has stopped.[/]")
    out.print(f"[bold cyan]$ vacate check {path}[/]")
    rc = cli.main(["check", path], env)
    out.print("")
    return rc


def _backup(path: str, out, env: Env, cli) -> None:
    """A cold backup of the EAGLE-3 training data and the pip freeze, verified from the target."""
    import os
    import shutil
    import tempfile

    sources = [p for p in (os.path.join(path, "eagle3", "data"),
                           os.path.join(path, "ml-env-backup-cuda128.txt")) if os.path.exists(p)]
    if not sources:
        return
    dest = tempfile.mkdtemp(prefix="vacate-demo-backup-")
    try:
        rel = " ".join(os.path.relpath(p, path) for p in sources)
        out.print(f"[bold cyan]$ vacate archive {rel} --to {dest} --name eagle3-data[/]")
        cli.main(["archive", *sources, "--to", dest, "--name", "eagle3-data", "--no-progress"],
                 env)
        out.print("")
        archive = os.path.join(dest, "eagle3-data")
        out.print(f"[bold cyan]$ vacate verify {archive}[/]")
        cli.main(["verify", archive, "--against", *sources[:1], "--no-progress"], env)
        out.print(f"[dim]Restorable without vacate: see {archive}/README[/]")
        out.print("")
    finally:
        shutil.rmtree(dest, ignore_errors=True)


# what the person retiring the example decides beyond the defaults: the model comes back from
# the hub, the hidden-state cache is regenerable (and 4.8 TB), the draft checkpoints stay on
# the cold volume
PICKS = ("--delete", "models", "--delete", "eagle3/cache/hidden_states",
         "--keep", "eagle3/outputs")


def _start_server(path: str):
    """The stand-in server mapping a shard: a transient systemd unit with Restart=always where
    a manager answers (stopping the unit is then the only way to end it), else a process.
    Returns (what to stop it with, its description), or None without shards."""
    import glob
    import os
    import shutil
    import subprocess
    import sys

    shards = sorted(glob.glob(os.path.join(path, "models", "*", "*.safetensors")))
    if not shards:
        return None
    argv = [sys.executable, "-c", _SERVER, "--model-path", shards[0]]
    if shutil.which("systemd-run") and os.path.isdir("/run/systemd/system"):
        unit = "vacate-demo-sglang.service"
        r = subprocess.run(["systemd-run", f"--unit={unit}", "--property=Restart=always",
                            "--collect", "--quiet", *argv], capture_output=True, check=False)
        if r.returncode == 0:
            return ("unit", unit), f"a transient unit {unit} with Restart=always"
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd="/")
    if p.stdout is None or p.stdout.readline().strip() != b"serving":
        p.kill()
        p.wait()
        return None
    return ("process", p), f"a process (pid {p.pid})"


def _stop_server(handle) -> None:
    import subprocess

    kind, what = handle
    if kind == "unit":
        subprocess.run(["systemctl", "stop", what], capture_output=True, check=False)
    elif what.poll() is None:
        what.terminate()
        what.wait()
    else:
        what.wait()


def _retire(path: str, out, env: Env, cli, *, apply: bool, work: str) -> None:
    """The plan, made while the server runs again; applied with --yes; what remains. The
    plan, its journal and the archives go to ``work`` (the demo's own directory, beside the
    image, not on the volume), removed with the rest of the demo."""
    import os

    work = os.path.join(work, "retire")
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, "data.plan")
    backup = os.path.join(work, "backup")
    started = _start_server(path)
    try:
        out.print("[bold]Retiring it.[/]" + (f" [dim]The stand-in server runs again, as "
                                            f"{started[1]}.[/]" if started else ""))
        picks = " ".join(PICKS)
        out.print(f"[bold cyan]$ vacate plan {path} --archive-to {backup} {picks} -o {plan}[/]")
        rc = cli.main(["plan", path, "--archive-to", backup, *PICKS, "-o", plan], env)
        out.print("")
        if rc != 0:
            return
        if not apply:
            out.print(f"[dim]--keep: not applied. To apply it yourself: vacate apply {plan}[/]")
            return
        out.print(f"[bold cyan]$ vacate apply {plan} --yes[/]")
        cli.main(["apply", plan, "--yes"], env)
        out.print("")
        out.print(f"[bold cyan]$ vacate report {plan}[/]")
        cli.main(["report", plan], env)
        out.print("")
    finally:
        if started:
            _stop_server(started[0])


def _plan_only(path: str, out, env: Env) -> None:
    """A plain directory is no volume to retire: the plan vacate would make for one."""
    from vacate.decide.plan import make_plan
    from vacate.decide.request import PlanRequest
    from vacate.observing.observe import observe
    from vacate.output import plan_view

    out.print("[bold]Retiring it[/] needs a volume of its own (run as root). As a plain "
              "directory, this is what the plan would do with its items (its users here are "
              "those of the whole filesystem, left out), and it stops there:")
    overrides = [(PICKS[i].removeprefix("--"), PICKS[i + 1]) for i in range(0, len(PICKS), 2)]
    plan = make_plan(observe(path, host=env.host, users=False),
                     PlanRequest(archive_to="BACKUP", overrides=overrides))
    plan_view.render(plan, out, steps=False)
    out.print("")
