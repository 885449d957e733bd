"""``vacate collection [--output-dir DIR]``: the ``vacate.volume`` Ansible collection as a tarball
(``ansible-galaxy collection install DIR/vacate-volume-VERSION.tar.gz`` installs it, offline),
its module_utils holding the observing layer this vacate ships (``vacate payload``)."""

from __future__ import annotations

import argparse

from vacate.cli.env import Env
from vacate.observing.errors import EXIT_OK


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("collection", help="build the vacate.volume Ansible collection "
                                          "(needs ansible-core and a checkout of vacate)")
    p.add_argument("--output-dir", metavar="DIR", default="dist",
                   help="where the tarball goes (default: dist)")
    p.add_argument("--build-dir", metavar="DIR", default="build/collection",
                   help="where the collection's tree is assembled (default: build/collection)")
    return p


def run(args, env: Env) -> int:
    from vacate.remote import collection

    tarball = collection.build(args.output_dir, args.build_dir)
    print(tarball, file=env.stdout)
    print(f"install it: ansible-galaxy collection install {tarball}", file=env.stderr)
    return EXIT_OK
