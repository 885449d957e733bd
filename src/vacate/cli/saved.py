"""Reading a saved observation named on the command line (``--from FILE``, ``-`` for stdin):
a file the person names may be a pipe (``check --from <(vacate observe …)``)."""

from __future__ import annotations

from vacate.cli.env import Env
from vacate.observing.errors import VacateError
from vacate.observing.model.codec import Malformed
from vacate.observing.model.observation import Observation

LIMIT = 4 << 30     # an observation of millions of files is tens of MB; this is not one


def load_observation(spec: str, env: Env) -> Observation:
    """The observation in the file ``spec`` (or stdin for ``-``); a clear error (exit 2)
    when it cannot be read or is not one."""
    try:
        if spec == "-":
            if env.stdin is None:
                raise VacateError("--from -: there is no standard input")
            text = env.stdin.read(LIMIT)
        else:
            with open(spec, encoding="ascii", errors="surrogateescape") as f:
                text = f.read(LIMIT)
    except OSError as e:
        raise VacateError(f"cannot read {spec}: {e.strerror or e}") from None
    try:
        return Observation.loads(text)
    except Malformed as e:
        raise VacateError(f"{spec}: {e}",
                          hint="make one with: vacate observe PATH -o FILE") from None
