"""Validate scenario files (and everything they reference) without running them.

Usage::

    python scripts/validate_scenario.py FILE_OR_DIR [FILE_OR_DIR ...] [--kind KIND]
        [--allow-plugins MODULE[,MODULE]]

A shipped file or folder is named as ``builtin:FOLDER/FILE`` or ``builtin:FOLDER``.

The same as ``simulate validate`` (see :mod:`simulator.commands.validate`):
prints one ``OK`` line per valid file and every problem of each invalid one;
exits 0 when all are valid, 2 otherwise.
"""

from __future__ import annotations

import argparse
import sys

from simulator.commands import validate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    validate.add_arguments(parser)
    return validate.execute(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
