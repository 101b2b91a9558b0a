"""Helpers shared by the command-line entry points: error reporting and exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable

from simulator.errors import EXIT_INPUT_ERROR, EXIT_NON_FINITE_RESULT, InputError, NonFiniteResult

EXIT_INTERRUPTED = 130
"""Process exit code after Ctrl-C (128 + SIGINT), as shells report it."""


def run_guarded(entry: Callable[[], int]) -> int:
    """Run ``entry``; print input errors as one clear message and return exit code 2.

    An interrupt (Ctrl-C) prints one line and returns :data:`EXIT_INTERRUPTED`;
    results are swapped in whole as the last step of a run, so an interrupted
    run leaves any earlier results as they were.

    Programming errors still raise with a traceback: they are bugs to report,
    not problems with the user's input.
    """
    try:
        return entry()
    except InputError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_INPUT_ERROR
    except NonFiniteResult as exc:
        print(exc, file=sys.stderr)
        return EXIT_NON_FINITE_RESULT
    except KeyboardInterrupt:
        print("\ninterrupted: no new results were written", file=sys.stderr)
        return EXIT_INTERRUPTED
