"""Helpers shared by the command-line entry points: error reporting, exit codes, consent."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import simulator.written_results as written_results
from simulator.errors import (
    EXIT_INPUT_ERROR,
    EXIT_NON_FINITE_RESULT,
    InputError,
    Issue,
    NonFiniteResult,
    make_issue,
)

EXIT_INTERRUPTED = 130
"""Process exit code after Ctrl-C (128 + SIGINT), as shells report it."""


def integer_at_least(minimum: int) -> Callable[[str], int]:
    """An ``argparse`` type: a whole number of at least ``minimum``, else what is allowed."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"got {text!r}; allowed: an integer >= {minimum}")
        return value

    return parse


def run_guarded(entry: Callable[[], int], allow_plugins: Sequence[str] = ()) -> int:
    """Run ``entry``; print input errors as one clear message and return exit code 2.

    ``allow_plugins`` holds the values of ``--allow-plugins``: while ``entry``
    runs, the modules they name are allowed as policy plug-ins (see
    :func:`plugin_consent`).

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
        with plugin_consent(allow_plugins):
            return entry()
    except InputError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_INPUT_ERROR
    except NonFiniteResult as exc:
        print(exc, file=sys.stderr)
        return EXIT_NON_FINITE_RESULT
    except KeyboardInterrupt:
        print(f"\n{interrupted_message(written_results.since(start))}", file=sys.stderr)
        return EXIT_INTERRUPTED


@contextmanager
def plugin_consent(values: Sequence[str]) -> Iterator[None]:
    """Allow the modules of ``--allow-plugins`` values (``MODULE[,MODULE]``) for the block.

    They are added to the environment variable ``SPECDEC_ALLOW_PLUGINS``
    (restored afterwards), which the scenario loader reads and the worker
    processes of sweeps and planners inherit.

    Raises:
        InputError: A value that is not a comma-separated list of module names.
    """
    from policies.plugins import ALLOW_PLUGINS_ENV, ALLOW_PLUGINS_OPTION, split_module_list

    modules: list[str] = []
    issues: list[Issue] = []
    for value in values:
        good, bad = split_module_list(value)
        modules.extend(good)
        issues.extend(
            make_issue(
                "command line",
                ALLOW_PLUGINS_OPTION,
                part,
                "comma-separated module names, e.g. mypkg,other.policies",
                "not a module name",
            )
            for part in (bad or (() if good else (value,)))
        )
    if issues:
        raise InputError(issues)
    if not modules:
        yield
        return
    before = os.environ.get(ALLOW_PLUGINS_ENV)
    os.environ[ALLOW_PLUGINS_ENV] = ",".join([*filter(None, [before]), *modules])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ALLOW_PLUGINS_ENV, None)
        else:
            os.environ[ALLOW_PLUGINS_ENV] = before


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
