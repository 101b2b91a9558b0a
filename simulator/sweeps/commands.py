"""``simulate sweep`` and ``simulate capacity``: the command-line side of :mod:`simulator.sweeps`."""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.cli_support import run_guarded
from simulator.sweeps.search import DEFAULT_HIGH, DEFAULT_LOW, DEFAULT_TOLERANCE


def sweep_command(argv: list[str]) -> int:
    """``simulate sweep SWEEP [-o DIR] [--executor local|ray] [--workers N] [--ray-address A]``."""
    parser = argparse.ArgumentParser(
        prog="simulate sweep",
        description="Run a scenario at every point of a sweep file and write one table "
        "(sweep.csv, and sweep.parquet with pyarrow) plus each run's results directory.",
    )
    parser.add_argument("sweep", type=Path, help="sweep YAML or JSON file")
    parser.add_argument(
        "-o", "--output", type=Path, default=None, help="directory (default results/sweeps/<id>)"
    )
    parser.add_argument("--executor", default="local", help="local (default) or ray")
    parser.add_argument(
        "--workers", type=int, default=None, help="processes (default: this machine's CPUs)"
    )
    parser.add_argument("--ray-address", default=None, help="a running Ray cluster (ray only)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print no summary line")
    args = parser.parse_args(argv)

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
            failed = int((frame["status"] == "failed").sum())
            print(f"{len(frame)} runs, {failed} failed")
        return 1 if (frame["status"] == "failed").any() else 0

    return run_guarded(entry)


def capacity_command(argv: list[str]) -> int:
    """``simulate capacity SCENARIO --slo-attainment F [--low --high --tolerance --set --seed]``."""
    parser = argparse.ArgumentParser(
        prog="simulate capacity",
        description="Bisect workload.arrival_scale for the highest rate meeting an SLO attainment.",
    )
    parser.add_argument("scenario", type=Path, help="scenario YAML or JSON file (open loop)")
    parser.add_argument(
        "--slo-attainment", type=float, required=True, help="fraction of requests meeting their SLO"
    )
    parser.add_argument(
        "--low",
        type=float,
        default=DEFAULT_LOW,
        help=f"lowest arrival_scale (default {DEFAULT_LOW})",
    )
    parser.add_argument(
        "--high",
        type=float,
        default=DEFAULT_HIGH,
        help=f"highest arrival_scale (default {DEFAULT_HIGH})",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"stop when the interval is this relative width (default {DEFAULT_TOLERANCE})",
    )
    parser.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print the result line only")
    args = parser.parse_args(argv)

    def entry() -> int:
        from simulator.sweeps.search import capacity

        result = capacity(
            args.scenario,
            args.slo_attainment,
            overrides=args.overrides,
            seed=args.seed,
            low=args.low,
            high=args.high,
            tolerance=args.tolerance,
        )
        if not args.quiet:
            print(f"{'arrival_scale':>14} {'requests/s':>11} {'attainment':>11}  verdict")
            for p in result.probes:
                attained = "-" if p.slo_attainment is None else f"{p.slo_attainment:.1%}"
                print(
                    f"{p.arrival_scale:>14.4g} {p.offered_requests_per_s:>11.4g} {attained:>11}  "
                    f"{'pass' if p.passed else 'fail'}"
                )
        print(result.describe())
        return 0

    return run_guarded(entry)
