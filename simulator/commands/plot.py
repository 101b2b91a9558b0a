"""``simulate plot RUN...``: turn one or several results directories into figures and a report.

One directory: figures (PNG and SVG), ``report.md`` and a self-contained
``report.html`` go to ``OUT`` (default ``RUN/report``). Several: the first run
is the baseline; latency CDFs are overlaid and the headline table gains the
ratio of every other run to it (default ``OUT``: ``comparison/`` beside the
first directory). Exit status 0, or 2 on a missing or malformed results
directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "draw figures and write a report for one or several results directories"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate plot``."""
    parser.add_argument("runs", nargs="+", type=Path, help="results directories (first: baseline)")
    parser.add_argument("-o", "--output", type=Path, default=None, help="output directory")


def execute(args: argparse.Namespace) -> int:
    """Run ``simulate plot``."""
    from simulator.cli_support import run_guarded

    def entry() -> int:
        from simulator.report import load_run, write_report

        runs = [load_run(path) for path in args.runs]
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
