"""Options several subcommands share: scenario overrides, search bounds, executors, consent."""

from __future__ import annotations

import argparse


def add_scenario_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--seed N`` and the repeatable ``--set KEY=VALUE`` to ``parser``."""
    parser.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set scheduler.verify.batching.max_batch=16",
    )


def add_search_bounds(parser: argparse.ArgumentParser) -> None:
    """Add ``--low``, ``--high`` and ``--tolerance`` of the arrival-scale bisection."""
    from simulator.capacity_bounds import DEFAULT_HIGH, DEFAULT_LOW, DEFAULT_TOLERANCE

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


def add_executor_options(parser: argparse.ArgumentParser, runs: str = "the runs") -> None:
    """Add ``--executor``, ``--workers`` and ``--ray-address`` (``runs``: what they run)."""
    parser.add_argument(
        "--executor", default="local", help=f"where {runs} run: local (default) or ray"
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="processes (default: this machine's CPUs)"
    )
    parser.add_argument("--ray-address", default=None, help="a running Ray cluster (ray only)")


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--allow-plugins MODULE[,MODULE]``."""
    parser.add_argument(
        "--allow-plugins",
        dest="allow_plugins",
        action="append",
        default=[],
        metavar="MODULE[,MODULE]",
        help="let the scenario import policy classes from these modules (and the modules "
        "inside them) by import path, module.path:ClassName; without it nothing is imported",
    )
