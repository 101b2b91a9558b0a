"""``simulate plan SPACE``: the offline placement search over a plan space.

Evaluates every configuration of a plan-space file (replicas and
tensor-parallel degree per target pool, speculation mode, k, controller):
goodput per GPU at the scenario's rate and the highest rate meeting an SLO
attainment target. Writes ``plan.csv`` (ranked) and a figure, and prints the
top rows and ``N points run, 0 resumed, F failed`` (no resume: every
configuration runs); see ``docs/planning.md``. Exit status 1 when a configuration
failed (recorded in the table), 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.capacity_bounds import DEFAULT_SLO_ATTAINMENT
from simulator.commands.scenario_options import (
    add_executor_options,
    add_plugin_option,
    add_search_bounds,
)

HELP = "search pool sizes, parallelism and speculation for the best goodput per GPU"


DEFAULT_TOP = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate plan``."""
    parser.add_argument("space", type=Path, help="plan-space YAML or JSON file")
    parser.add_argument(
        "-o", "--output", type=Path, default=None, help="directory (default results/plans/<id>)"
    )
    parser.add_argument(
        "--slo-attainment",
        type=float,
        default=DEFAULT_SLO_ATTAINMENT,
        help=f"fraction of requests meeting their SLO (default {DEFAULT_SLO_ATTAINMENT}, DistServe's)",
    )
    add_search_bounds(parser)
    add_executor_options(parser)
    add_plugin_option(parser)
    parser.add_argument(
        "--top", type=int, default=DEFAULT_TOP, help=f"rows printed (default {DEFAULT_TOP})"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print the best row only")


def execute(args: argparse.Namespace) -> int:
    """Run ``simulate plan``."""
    from simulator.cli_support import run_guarded

    def entry() -> int:
        from simulator.commands.sweep import points_line
        from simulator.errors import InputError, make_issue
        from simulator.sweeps.plan import plan, render_top

        if args.top < 1:  # refused before the search, not after it
            raise InputError([make_issue("command line", "--top", args.top, "an integer >= 1")])
        frame = plan(
            args.space,
            args.output,
            slo_attainment=args.slo_attainment,
            low=args.low,
            high=args.high,
            tolerance=args.tolerance,
            executor=args.executor,
            workers=args.workers,
            ray_address=args.ray_address,
        )
        print(render_top(frame, 1 if args.quiet else args.top))
        if not args.quiet:
            failed = int((frame["status"] == "failed").sum())
            print(points_line(len(frame) - failed, 0, failed))
        return 1 if (frame["status"] == "failed").any() else 0

    return run_guarded(entry, args.allow_plugins)
