"""Logging options of the command line: ``-v/--verbose`` and ``--log-level``.

Library modules log through ``logging.getLogger(__name__)``; the command line
sends those records to stderr at the level chosen here (default: warnings).
"""

from __future__ import annotations

import argparse
import logging

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LEVEL = logging.WARNING


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``-v/--verbose`` and ``--log-level`` to ``parser``."""
    group = parser.add_argument_group("logging")
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log more to stderr: -v for info, -vv for debug",
    )
    group.add_argument(
        "--log-level",
        choices=LEVELS,
        type=str.upper,
        default=None,
        help="log records of this level and above to stderr (overrides -v; default WARNING)",
    )


def level_of(verbose: int, log_level: str | None) -> int:
    """Return the logging level asked for (``--log-level`` wins over ``-v``)."""
    if log_level is not None:
        return int(getattr(logging, log_level))
    return max(logging.DEBUG, DEFAULT_LEVEL - 10 * verbose)


def configure_logging(verbose: int, log_level: str | None) -> None:
    """Send log records of the chosen level and above to stderr."""
    logging.basicConfig(
        level=level_of(verbose, log_level),
        format="%(levelname)s %(name)s: %(message)s",
        force=True,
    )
