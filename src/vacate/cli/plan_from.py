"""``vacate plan --from EDITED [-o NEW]``: a plan whose items' actions a person edited, with
its steps made again from them (:mod:`vacate.flow.replan`); what changed against the file's
steps and what was looked at again go to stderr, the plan as ``plan`` prints it."""

from __future__ import annotations

from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK, UsageError

EXIT_INCOMPLETE = 4


def run(args, env: Env) -> int:
    from vacate.flow.replan import replan
    from vacate.observing.fsio import write_atomic

    if args.path or args.archive_to or args.keep or args.archive or args.delete or \
            args.archive_format != "tar" or args.verify_pool or \
            args.free_volume:
        raise UsageError("--from takes the plan file alone: edit its items' actions, then "
                         "vacate plan --from FILE -o NEW")
    got = replan(args.from_plan, host=env.host,
                 outputs=(args.output,) if args.output else ())
    err = env.console(stderr=True)
    for line in got.looked_again:
        err.print(line, markup=False)
    if got.changes:
        err.print(f"the steps made from the items' actions as edited in {args.from_plan}, "
                  "against its steps:", markup=False)
        for line in got.changes:
            err.print(f"  {line}", markup=False)
    else:
        err.print(f"the steps of {args.from_plan} are already the ones its items make",
                  markup=False)
    text = got.plan.dumps()
    if args.output:
        write_atomic(args.output, text.encode("ascii"))
        err.print(f"written to {args.output}: review it, then vacate apply {args.output}",
                  markup=False)
    if args.json:
        env.stdout.write(text)
    else:
        from vacate.output import plan_view

        plan_view.render(got.plan, env.console())
    return EXIT_INCOMPLETE if got.plan.blocked else EXIT_OK
