"""``simulate validate PATH...``: validate scenario files and everything they reference.

A directory is searched recursively for ``.yaml``, ``.yml`` and ``.json``
files. Device profiles, acceptance curves and LUTs (``.csv``/``.parquet``)
can be validated directly too; their kind is detected, or forced with
``--kind``. Prints one ``OK`` line per valid file and every problem of each
invalid one; exits 0 when all are valid, 2 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simulator.commands.scenario_options import add_plugin_option

HELP = "validate scenario files (and what they reference) without running them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate validate``."""
    parser.add_argument("paths", nargs="+", type=Path, help="files or directories")
    parser.add_argument(
        "--kind",
        choices=("scenario", "lut", "profile", "acceptance", "sweep", "plan"),
        default=None,
        help="treat every file as this kind instead of detecting it",
    )
    add_plugin_option(parser)


def execute(args: argparse.Namespace) -> int:
    """Run ``simulate validate``."""
    from simulator.cli_support import run_guarded

    def entry() -> int:
        from simulator.errors import EXIT_INPUT_ERROR, InputError, make_issue
        from simulator.input_files import file_problem
        from simulator.validate import expand_paths, validate_file

        unreadable = [(p, file_problem(p)) for p in args.paths if not p.is_dir()]
        problems = [
            make_issue(p, "", str(p), "an existing file or directory", problem)
            for p, problem in unreadable
            if problem is not None
        ]
        if problems:
            raise InputError(problems)
        files = list(expand_paths(args.paths))
        if not files:
            raise InputError(
                [
                    make_issue(
                        p,
                        "",
                        str(p),
                        "a directory holding .yaml/.yml/.json files",
                        "nothing to validate",
                    )
                    for p in args.paths
                ]
            )
        failed = 0
        for path in files:
            verdict = validate_file(path, args.kind)
            if verdict.error is None:
                print(f"OK {path}: {verdict.summary}")
            else:
                failed += 1
                print(f"FAIL {path}", file=sys.stderr)
                print(verdict.error.render(), file=sys.stderr)
        if failed:
            print(f"{failed} of {len(files)} file(s) invalid", file=sys.stderr)
            return EXIT_INPUT_ERROR
        return 0

    return run_guarded(entry, args.allow_plugins)
