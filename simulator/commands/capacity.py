"""``simulate capacity SCENARIO [--slo-attainment F] [-o DIR]``: the highest rate meeting an SLO attainment.

Bisects ``workload.arrival_scale`` (as DistServe and Vidur-Search do) and
prints every probe, then the highest passing rate in requests/s and per GPU,
or, when no rate passes, what caps the attainment; with ``-o DIR`` also
writes ``probes.csv`` and ``capacity.json`` there; see ``docs/sweeps.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.capacity_bounds import DEFAULT_SLO_ATTAINMENT
from simulator.commands.scenario_options import (
    add_plugin_option,
    add_scenario_options,
    add_search_bounds,
)

HELP = "bisect workload.arrival_scale for the highest rate meeting an SLO attainment"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate capacity``."""
    parser.add_argument("scenario", type=Path, help="scenario YAML or JSON file (open loop)")
    parser.add_argument(
        "--slo-attainment",
        type=float,
        default=DEFAULT_SLO_ATTAINMENT,
        help=f"fraction of requests meeting their SLO (default {DEFAULT_SLO_ATTAINMENT}, DistServe's)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="also write probes.csv and capacity.json into this directory",
    )
    add_search_bounds(parser)
    add_scenario_options(parser)
    add_plugin_option(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print the result line only")


def execute(args: argparse.Namespace) -> int:
    """Run ``simulate capacity``."""
    from simulator.cli_support import run_guarded

    def entry() -> int:
        from simulator.errors import InputError
        from simulator.scenario.overrides import blame_overrides
        from simulator.sweeps.search import capacity

        try:
            result = capacity(
                args.scenario,
                args.slo_attainment,
                overrides=args.overrides,
                seed=args.seed,
                low=args.low,
                high=args.high,
                tolerance=args.tolerance,
            )
        except InputError as exc:  # a --set option's problem is the command line's
            raise InputError(blame_overrides(exc.issues, args.scenario, args.overrides)) from None
        if not args.quiet:
            print(f"{'arrival_scale':>14} {'requests/s':>11} {'attainment':>11}  verdict")
            for p in result.probes:
                attained = "-" if p.slo_attainment is None else f"{p.slo_attainment:.1%}"
                print(
                    f"{p.arrival_scale:>14.4g} {p.offered_requests_per_s:>11.4g} {attained:>11}  "
                    f"{'pass' if p.passed else 'fail'}"
                )
        print(result.describe())
        if args.output is not None:
            from simulator.sweeps.capacity_table import write_capacity

            write_capacity(result, args.output)
            if not args.quiet:
                print(f"probes in {args.output}")
        return 0

    def checked_entry() -> int:
        if args.output is not None:  # refused before the first probe, not after the search
            from simulator.sweeps.capacity_table import check_capacity_dir

            check_capacity_dir(args.output)
        return entry()

    return run_guarded(checked_entry, args.allow_plugins)
