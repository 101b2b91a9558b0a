"""User-facing input errors.

Every problem with a user's input (a scenario, a device profile, a LUT, an
acceptance curve, a trace) is reported as an :class:`Issue` naming the file,
the key path inside it, the offending value and what is allowed. Loaders
collect all issues of a file and raise them together as one
:class:`InputError`; the command-line tools print them and exit with
:data:`EXIT_INPUT_ERROR` without a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

EXIT_INPUT_ERROR = 2
"""Process exit code for bad user input."""

EXIT_NON_FINITE_RESULT = 1
"""Process exit code when a run's results hold a number that is not finite (none are written)."""


_MAX_VALUE_CHARS = 80


def describe_value(value: object) -> str:
    """Return a short, readable rendering of a bad value for a message.

    A long value is cut to 80 characters, followed by its full length.
    """
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    text = repr(value)
    if len(text) > _MAX_VALUE_CHARS:
        size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters"
        text = text[: _MAX_VALUE_CHARS - 3] + f"... ({size})"
    return text


@dataclass(frozen=True)
class Issue:
    """One problem found in one input file.

    Attributes:
        file: The file the problem is in, as the user named it (or resolved).
        key_path: Where in the file, e.g. ``speculation.adaptive_k.k_min`` or
            ``row 17, column latency_ms``; empty for the file as a whole.
        value: The rendered bad value (see :func:`describe_value`).
        allowed: What would have been accepted.
        problem: A short statement of what is wrong.
    """

    file: str
    key_path: str
    value: str
    allowed: str
    problem: str = ""

    def format(self) -> str:
        """Render the issue as one line: ``file: key: value: problem; allowed``."""
        where = f"{self.file}: {self.key_path}" if self.key_path else self.file
        head = f"{where}: {self.problem}" if self.problem else where
        return f"{head} (got {self.value}; allowed: {self.allowed})"


def make_issue(
    file: str | Path,
    key_path: str,
    value: object,
    allowed: str,
    problem: str = "",
) -> Issue:
    """Build an :class:`Issue`, rendering ``value`` with :func:`describe_value`."""
    return Issue(str(file), key_path, describe_value(value), allowed, problem)


class InputError(Exception):
    """Bad user input: one or more :class:`Issue` records, reported together."""

    def __init__(self, issues: Iterable[Issue]) -> None:
        self.issues: tuple[Issue, ...] = tuple(issues)
        if not self.issues:
            raise ValueError("InputError needs at least one Issue")
        # ``args`` holds the issues so that ``type(exc)(*exc.args)`` (which
        # SimPy uses to re-raise a failure from inside a process) rebuilds it.
        super().__init__(self.issues)

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        """Return all issues, one per line."""
        count = len(self.issues)
        noun = "problem" if count == 1 else "problems"
        lines = [f"error: {count} {noun} in the input"]
        lines.extend(f"  - {issue.format()}" for issue in self.issues)
        return "\n".join(lines)


class NonFiniteResult(Exception):
    """A run produced a number that is not finite (``inf`` or NaN where a number belongs).

    Inputs are bounded so that this cannot happen (``simulator/limits.py``);
    if it does, no result file is written and the message names the file,
    the place in it and the value.
    """

    def __init__(self, file: str, where: str, value: float) -> None:
        self.file = file
        self.where = where
        self.value = value
        super().__init__(file, where, value)

    def __str__(self) -> str:
        return (
            f"error: {self.file}: {self.where} is {self.value}: a result is not a finite number, "
            "so no results were written (please report the scenario: its inputs are within "
            "the documented bounds)"
        )


def raise_if_any(issues: Sequence[Issue]) -> None:
    """Raise :class:`InputError` when ``issues`` is not empty."""
    if issues:
        raise InputError(issues)


def key_path(parts: Iterable[object]) -> str:
    """Join a JSON path (keys and list indices) as ``a.b[2].c``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
