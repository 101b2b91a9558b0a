"""Helpers shared by the command-line entry points: error reporting and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable

from simulator.errors import EXIT_INPUT_ERROR, InputError


def run_guarded(entry: Callable[[], int]) -> int:
    """Run ``entry``; print input errors as one clear message and return exit code 2.

    Programming errors still raise with a traceback: they are bugs to report,
    not problems with the user's input.
    """
    try:
        return entry()
    except InputError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_INPUT_ERROR
