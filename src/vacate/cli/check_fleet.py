"""``vacate check --inventory FILE [--limit PATTERN] [--forks N] PATH``: the check on every
host of an Ansible inventory, ``forks`` at a time; one table (or ``--json`` a list of
``vacate.check/1`` documents, ``--output-dir DIR`` one file per host, ``-o FILE`` the list).

Exit status: 1 if any host is in use, else 3 if any could not be told, else 0; 2 when the
inventory itself could not be read."""

from __future__ import annotations

from vacate import remote
from vacate.cli import paths
from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK, EXIT_UNKNOWN, UsageError


def add_arguments(p) -> None:
    g = p.add_argument_group("many hosts (an Ansible inventory; needs ansible-core)")
    g.add_argument("--inventory", "-i", metavar="FILE", type=paths.inventory,
                   help="check PATH on every host of this inventory (any form Ansible reads: "
                        "INI, YAML, a directory, a script or plugin)")
    g.add_argument("--limit", "-l", metavar="PATTERN",
                   help="only the hosts Ansible's pattern selects (e.g. 'web:!web3')")
    g.add_argument("--forks", "-f", type=int, metavar="N",
                   help="hosts at once (default 5, as Ansible's)")
    g.add_argument("--host-timeout", type=float, metavar="SECONDS",
                   help="give up on a host after this long in all (a host whose far side "
                        "goes silent is given up after --stall-timeout, 30 s by default: "
                        "its own row, never the fleet's result)")
    g.add_argument("--output-dir", metavar="DIR",
                   help="also write one vacate.check/1 document per host, DIR/HOST.json "
                        "(-o FILE writes them all, as a list, to one file)")
    g.add_argument("--vault-password-file", action="append", default=[], metavar="FILE",
                   help="as to Ansible, for vaulted inventory variables")
    g.add_argument("--vault-id", action="append", default=[], metavar="ID",
                   help="as to Ansible, for vaulted inventory variables")


def wanted(args) -> bool:
    """Whether the fleet options were given (``--inventory``, or one that needs it)."""
    if args.inventory is not None:
        return True
    given = [o for o, v in (("--limit", args.limit), ("--forks", args.forks),
                            ("--host-timeout", args.host_timeout),
                            ("--output-dir", args.output_dir),
                            ("--vault-password-file", args.vault_password_file),
                            ("--vault-id", args.vault_id)) if v]
    if given:
        raise UsageError(f"{', '.join(given)} need --inventory")
    return False


def run(args, env: Env) -> int:
    from rich.markup import escape

    from vacate.flow import fleet
    from vacate.remote import inventory

    if args.path is None:
        raise UsageError("give the PATH to check on every host")
    for opt, v in (("--from", args.saved), ("--host", args.remote), ("--ct", args.ct)):
        if v is not None:
            raise UsageError(f"--inventory and {opt} do not go together")
    forks = fleet.DEFAULT_FORKS if args.forks is None else args.forks
    if forks < 1:
        raise UsageError("--forks must be 1 or more")
    if args.host_timeout is not None and args.host_timeout <= 0:
        raise UsageError("--host-timeout must be more than 0")
    vault = inventory.VaultArgs(tuple(
        [x for f in args.vault_password_file for x in ("--vault-password-file", f)]
        + [x for i in args.vault_id for x in ("--vault-id", i)]))
    data, unparsed = inventory.read(args.inventory, args.limit, vault)
    problems = [f"ansible-inventory could not parse {u}: the hosts there, if any, were not "
                "checked" for u in unparsed]
    hosts = inventory.hosts(data, vault=vault, python=args.python, become=args.become)
    if not hosts:
        raise UsageError(f"--inventory {args.inventory}: no hosts"
                         + (f" match --limit {args.limit!r}" if args.limit else ""))
    progress = env.console(stderr=True) if env.stderr_isatty else None

    def done(check, n, total):
        if progress is not None:
            from vacate.output.fleet_view import VERDICTS

            text, style = VERDICTS[check.safe]
            progress.print(f"[dim][{n}/{total}][/] {check.name}: [{style}]{text}[/] "
                           f"[dim]{check.elapsed_s:.1f} s[/]")
    checks = fleet.check_hosts(hosts, args.path, forks=forks, scan_tree=not args.no_scan,
                               configured=not args.no_config, timeout_s=args.host_timeout,
                               stall_s=remote.stall_of(args), on_done=done)
    if args.json or args.output_dir or args.output:
        from vacate.output import fleetfmt, jsonfmt

        docs = [fleetfmt.host_doc(c, args.path) for c in checks]
        if args.output_dir:
            fleetfmt.write_dir(args.output_dir, docs)
        if args.output:
            from vacate.observing.fsio import write_atomic

            write_atomic(args.output, jsonfmt.dumps(docs).encode("ascii"))
        if args.json:
            env.stdout.write(jsonfmt.dumps(docs))
    if not args.json:
        from vacate.output import fleet_view

        fleet_view.render(checks, args.path, env.console())
    if problems:
        # a host list that may be short is not a fleet found safe
        err = env.console(stderr=True)
        for p in problems:
            err.print(f"[yellow]could not tell:[/] {escape(p)}")
    code = fleet.exit_code(checks)
    return EXIT_UNKNOWN if problems and code == EXIT_OK else code
