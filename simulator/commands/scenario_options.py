"""Options every subcommand that loads a scenario shares: ``--seed`` and ``--set``."""

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
