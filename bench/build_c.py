"""Build the optional C modules of a checkout in place (next to their sources under ``src/``),
as ``build_ext --inplace`` does, from the ``ext-modules`` table of that checkout's
pyproject.toml, without reading the rest of it: for a second checkout to benchmark against
(``--baseline-src``), and where the setuptools at hand is older than the one pyproject's
``[project]`` table asks for.

    python3 bench/build_c.py /tmp/vacate-before
"""

from __future__ import annotations

import os
import sys
import tempfile
import tomllib


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        specs = tomllib.load(f)["tool"]["setuptools"]["ext-modules"]
    from setuptools import Extension, setup

    exts = [Extension(s["name"], [os.path.join(root, p) for p in s["sources"]],
                      include_dirs=[os.path.join(root, p) for p in s.get("include-dirs", [])],
                      depends=[os.path.join(root, p) for p in s.get("depends", [])])
            for s in specs]
    with tempfile.TemporaryDirectory(prefix="vacate-build-c-") as tmp:
        os.chdir(tmp)       # (setup() would read a pyproject.toml in the working directory)
        setup(name="vacate-c-modules", ext_modules=exts,
              script_args=["build_ext", "-q", "--build-lib", os.path.join(root, "src"),
                           "--build-temp", os.path.join(tmp, "build")])
    for s in specs:
        print(s["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
