"""``simulate sweep SWEEP``: run a scenario at every point of a sweep file.

Writes one table (``sweep.csv``, and ``sweep.parquet`` with pyarrow) plus each
run's results directory; see ``docs/sweeps.md``. Prints ``N points run, M
resumed, F failed`` (``-q``: nothing). Exit status 1 when a run failed
(recorded in the table), 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.commands.scenario_options import add_executor_options, add_plugin_option

HELP = "run a scenario at every point of a sweep file and tabulate the runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate sweep``."""
    parser.add_argument("sweep", type=Path, help="sweep YAML or JSON file")
    parser.add_argument(
        "-o", "--output", type=Path, default=None, help="directory (default results/sweeps/<id>)"
    )
    add_executor_options(parser)
    add_plugin_option(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print no summary line")


def points_line(ran: int, resumed: int, failed: int) -> str:
    """The console summary of a sweep or plan: ``N points run, M resumed, F failed``."""
    return f"{ran} point{'' if ran == 1 else 's'} run, {resumed} resumed, {failed} failed"


def execute(args: argparse.Namespace) -> int:
    """Run ``simulate sweep``."""
    from simulator.cli_support import run_guarded

    def entry() -> int:
        from simulator.sweeps.run import sweep

        frame = sweep(
            args.sweep,
            args.output,
            executor=args.executor,
            workers=args.workers,
            ray_address=args.ray_address,
        )
        if not args.quiet:
            counts = frame.attrs["outcomes"]
            print(points_line(counts["ran"], counts["resumed"], counts["failed"]))
        return 1 if (frame["status"] == "failed").any() else 0

    return run_guarded(entry, args.allow_plugins)
