"""``simulate validate PATH...``: validate scenario files and everything they reference.

A directory is searched recursively for ``.yaml``, ``.yml`` and ``.json``
files. Device profiles, acceptance curves and LUTs (``.csv``/``.parquet``)
can be validated directly too; their kind is detected, or forced with
``--kind``. A shipped file or folder is named as a scenario names one,
``builtin:scenarios/examples`` or ``builtin:device_profiles/a100-tp4.yaml``,
and validates as a local one does; its files are listed by their
``builtin:`` names. Prints one ``OK`` line per valid file and every problem
of each invalid one; exits 0 when all are valid, 2 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simulator.commands.scenario_options import add_plugin_option

HELP = "validate scenario files (and what they reference) without running them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate validate``."""
    parser.add_argument(
        "paths",
        nargs="+",
        help="files or directories (shipped ones as builtin:FOLDER/FILE or builtin:FOLDER)",
    )
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
        from simulator.builtin_data import (
            BUILTIN_PREFIX,
            builtin_path,
            data_root,
            is_builtin,
            unknown_builtin,
        )
        from simulator.errors import EXIT_INPUT_ERROR, InputError, make_issue
        from simulator.input_files import file_problem
        from simulator.validate import expand_paths, validate_file

        problems = [
            make_issue(
                "command line",
                "PATH",
                word,
                "builtin:<folder>[/<file>] naming a shipped file or folder",
                problem,
            )
            for word in args.paths
            if (problem := unknown_builtin(word, folders=True)) is not None
        ]
        if problems:
            raise InputError(problems)
        paths = [builtin_path(word) if is_builtin(word) else Path(word) for word in args.paths]
        unreadable = [(p, file_problem(p)) for p in paths if not p.is_dir()]
        problems = [
            make_issue(p, "", str(p), "an existing file or directory", problem)
            for p, problem in unreadable
            if problem is not None
        ]
        if problems:
            raise InputError(problems)
        files: list[tuple[Path, str]] = []
        for word, path in zip(args.paths, paths, strict=True):
            for file in expand_paths([path]):
                shown = file.relative_to(data_root()).as_posix() if is_builtin(word) else None
                files.append((file, str(file) if shown is None else BUILTIN_PREFIX + shown))
        if not files:
            raise InputError(
                [
                    make_issue(
                        word,
                        "",
                        word,
                        "a directory holding .yaml/.yml/.json files",
                        "nothing to validate",
                    )
                    for word in args.paths
                ]
            )
        failed = 0
        for path, shown in files:
            verdict = validate_file(path, args.kind)
            if verdict.error is None:
                print(f"OK {shown}: {verdict.summary}")
            else:
                failed += 1
                print(f"FAIL {shown}", file=sys.stderr)
                print(verdict.error.render(), file=sys.stderr)
        if failed:
            print(f"{failed} of {len(files)} file(s) invalid", file=sys.stderr)
            return EXIT_INPUT_ERROR
        return 0

    return run_guarded(entry, args.allow_plugins)
