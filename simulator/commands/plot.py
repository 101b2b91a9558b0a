"""``simulate plot RUN...``: turn one or several results directories into figures and a report.

One directory: figures (PNG and SVG), ``report.md`` and a self-contained
``report.html`` go to ``OUT`` (default ``RUN/report``). Several: the first run
is the baseline; latency CDFs are overlaid and the headline table gains the
ratio of every other run to it (default ``OUT``: ``comparison/`` beside the
first directory). Runs are named by their label (``metadata.label`` or
``simulate run --label``, else the scenario id); ``--label``, once per run in
the order of the directories, renames them, and runs that share a name gain
their scenario id, then seed, then position. Exit status 0, or 2 on a missing
or malformed results directory or more labels than directories.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "draw figures and write a report for one or several results directories"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate plot``."""
    parser.add_argument("runs", nargs="+", type=Path, help="results directories (first: baseline)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="output directory")
    parser.add_argument(
        "--label",
        dest="labels",
        action="append",
        default=[],
        metavar="NAME",
        help="name of a run in tables and legends; once per run, in the order of the directories",
    )


def execute(args: argparse.Namespace) -> int:
    """Run ``simulate plot``."""
    import sys

    from simulator.cli_support import run_guarded

    if len(args.labels) > len(args.runs):
        print(
            f"error: {len(args.labels)} --label options for {len(args.runs)} results directories",
            file=sys.stderr,
        )
        return 2

    def entry() -> int:
        from simulator.report import load_run, write_report

        labels = [*args.labels, *[None] * (len(args.runs) - len(args.labels))]
        runs = [load_run(path, label) for path, label in zip(args.runs, labels, strict=True)]
        if args.output is not None:
            out = args.output
        elif len(runs) == 1:
            out = args.runs[0] / "report"
        else:
            out = args.runs[0].parent / "comparison"
        for path in write_report(runs, out):
            print(path)
        return 0

    return run_guarded(entry)
