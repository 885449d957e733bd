"""`vacate check PATH --json` against `vacate check --from <(vacate observe PATH) --json`,
both through the real command: the same document, apart from timings, is what makes a saved
observation as good as a look at the machine."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

VACATE = f"{shlex.quote(sys.executable)} -m vacate"


def _doc(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode in (0, 1, 3), r.stderr[-3000:]
    doc = json.loads(r.stdout)
    doc.pop("elapsed_s", None)
    return doc


def _diff(a, b, at: str = "") -> list[str]:
    """Where two JSON values differ, one line each."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [line for k in dict.fromkeys([*a, *b])
                for line in _diff(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [line for i, (x, y) in enumerate(zip(a, b)) for line in _diff(x, y, f"{at}[{i}]")]
    return [] if a == b else [f"{at}: {a!r:.300} != {b!r:.300}"]


def check_both_ways(path: str, *flags: str, timeout: float = 300,
                    tries: int = 3) -> tuple[int, dict]:
    """The exit status and document of `check`; asserts that deciding from a saved
    observation (through a pipe, as a person would type it) gives the same. The two are two
    looks at the machine: where it changed in between (a container still starting adds a
    mount namespace), both are taken again, up to ``tries`` times; a field that does not
    survive the trip through the document differs every time."""
    for attempt in range(tries):
        try:
            return _both_ways(path, flags, timeout)
        except AssertionError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def _both_ways(path: str, flags: tuple[str, ...], timeout: float) -> tuple[int, dict]:
    q = " ".join(shlex.quote(a) for a in (*flags, path))
    obs_flags = " ".join(shlex.quote(a) for a in flags if a != "--json")
    direct = subprocess.run(f"{VACATE} check --json {q}", shell=True, capture_output=True,
                            text=True, timeout=timeout, check=False)
    saved = subprocess.run(
        ["bash", "-c", (f"{VACATE} check --json --from <({VACATE} observe {obs_flags} "
                       f"{shlex.quote(path)})")],
        capture_output=True, text=True, timeout=timeout, check=False)
    a, b = _doc(direct), _doc(saved)
    if a != b:
        raise AssertionError("check and check --from differ:\n" + "\n".join(_diff(a, b))[:6000])
    assert direct.returncode == saved.returncode, (direct.stderr, saved.stderr)
    return direct.returncode, a


def same_document(look_a, look_b, *, drop=("elapsed_s",), tries: int = 3) -> tuple[dict, dict]:
    """Two looks (functions returning a CompletedProcess of a ``--json`` command) that must
    give the same document but for the keys in ``drop``: asserted, taking both again (up to
    ``tries`` times) where the machine changed between them (another test's container, an
    ext4 volume settling its free space). Returns the two documents."""
    import os

    for attempt in range(tries):
        os.sync()
        ra, rb = look_a(), look_b()
        a, b = _doc(ra), _doc(rb)
        for d in (a, b):
            for k in drop:
                d.pop(k, None)
        if a == b and ra.returncode == rb.returncode:
            return a, b
        if attempt == tries - 1:
            raise AssertionError("the documents differ:\n" + "\n".join(_diff(a, b))[:6000]
                                 + f"\n(exit {ra.returncode} and {rb.returncode})")
    raise AssertionError("unreachable")
