"""Helpers shared by the command-line entry points: error reporting and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from simulator import written_results
from simulator.errors import EXIT_INPUT_ERROR, InputError

EXIT_INTERRUPTED = 130
"""Process exit code after Ctrl-C (128 + SIGINT), as shells report it."""


def run_guarded(entry: Callable[[], int]) -> int:
    """Run ``entry``; print input errors as one clear message and return exit code 2.

    An interrupt (Ctrl-C) prints one line and returns :data:`EXIT_INTERRUPTED`.
    Results are swapped in whole, so an interrupt before the swap leaves any
    earlier results as they were ("no new results were written"); one after
    it (while the timeline, report or table is still being written, or
    between the points of a sweep) names what is new, as
    :mod:`simulator.written_results` recorded it.

    Programming errors still raise with a traceback: they are bugs to report,
    not problems with the user's input.
    """
    start = written_results.mark()
    try:
        return entry()
    except InputError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt:
        print(f"\n{interrupted_message(written_results.since(start))}", file=sys.stderr)
        return EXIT_INTERRUPTED


def interrupted_message(written: list[Path]) -> str:
    """The line printed after Ctrl-C, given the paths written before it."""
    if not written:
        return "interrupted: no new results were written"
    if len(written) == 1:
        return f"interrupted: new results were written to {written[0]} before the interrupt"
    shown = ", ".join(str(path) for path in written[:3])
    more = ", ..." if len(written) > 3 else ""
    return (
        f"interrupted: new results were written to {len(written)} places "
        f"({shown}{more}) before the interrupt"
    )
