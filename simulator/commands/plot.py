"""``simulate plot RUN...``: turn one or several results directories into figures and a report.

One directory: figures (PNG and SVG), ``report.md`` and a self-contained
``report.html`` go to ``OUT`` (default ``RUN/report``). Several: the first run
is the baseline; latency CDFs are overlaid and the headline table gains the
ratio of every other run to it (default ``OUT``: ``comparison/`` beside the
first directory). Runs are named by their label (``metadata.label`` or
``simulate run --label``, else the scenario id); ``--label``, once per run in
the order of the directories, renames them, and runs that share a name gain
their scenario id, then seed, then position.

``OUT`` may hold an earlier report: its files (``report.md``,
``report.html``, every figure's PNG and SVG) are removed before the new ones
are written, so none of an earlier comparison's figures stays behind. A
folder holding anything else is refused, before anything is read or removed.

Exit status 0, or 2 on a missing or malformed results directory, an output
folder holding other files, or ``--label`` given a number of times other
than once per directory.
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
    from simulator.cli_support import run_guarded

    def entry() -> int:
        from simulator.errors import InputError, make_issue
        from simulator.report import load_run, write_report
        from simulator.report.folder import check_report_dir, clear_report_dir

        count = len(args.runs)
        if args.labels and len(args.labels) != count:
            raise InputError(
                [
                    make_issue(
                        "command line",
                        "--label",
                        args.labels,
                        f"no --label, or one per results directory ({count}), in their order",
                        f"{len(args.labels)} --label options for {count} results directories",
                    )
                ]
            )
        if args.output is not None:
            out, key = args.output, "-o/--output"
        elif count == 1:
            out, key = args.runs[0] / "report", "-o/--output (default: RUN/report)"
        else:
            out, key = args.runs[0].parent / "comparison", "-o/--output (default: comparison/)"
        check_report_dir(out, "command line", key)
        labels = args.labels or [None] * count
        runs = [load_run(path, label) for path, label in zip(args.runs, labels, strict=True)]
        clear_report_dir(out)
        for path in write_report(runs, out):
            print(path)
        return 0

    return run_guarded(entry)
