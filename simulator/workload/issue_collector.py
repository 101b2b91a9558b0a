"""Collecting row-level problems of a trace file without flooding the report.

A trace with a systematic fault (say, a column of text where numbers belong)
would otherwise produce one issue per row. :class:`RowIssues` keeps the first
few issues of each kind (column and problem) and adds one summary issue that
counts the rest, so the report stays readable and still names every kind of
problem.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from simulator.errors import Issue, make_issue

ISSUES_PER_KIND = 10
"""How many issues of one kind (same column and problem) are listed one by one."""


def row_key(row: int, column: str) -> str:
    """Return the key path of one cell: ``row 17, column latency_ms``."""
    return f"row {row}, column {column}"


class RowIssues:
    """Issues of one trace file, capped per (column, problem) kind.

    Args:
        file: The trace file the issues are about.
    """

    def __init__(self, file: Path) -> None:
        self.file = file
        self._issues: list[Issue] = []
        self._counts: Counter[tuple[str, str]] = Counter()
        self._allowed: dict[tuple[str, str], str] = {}

    def add(self, row: int, column: str, value: object, allowed: str, problem: str) -> None:
        """Record a problem with one cell (row numbers start at 1)."""
        kind = (column, problem)
        self._counts[kind] += 1
        self._allowed.setdefault(kind, allowed)
        if self._counts[kind] <= ISSUES_PER_KIND:
            self._issues.append(
                make_issue(self.file, row_key(row, column), value, allowed, problem)
            )

    def add_file_issue(self, key: str, value: object, allowed: str, problem: str) -> None:
        """Record a problem with the file as a whole or with a column (``column x``)."""
        self._issues.append(make_issue(self.file, key, value, allowed, problem))

    def __bool__(self) -> bool:
        return bool(self._issues)

    def issues(self) -> list[Issue]:
        """Return the recorded issues plus one summary per kind that was capped."""
        out = list(self._issues)
        for (column, problem), count in self._counts.items():
            hidden = count - ISSUES_PER_KIND
            if hidden > 0:
                out.append(
                    make_issue(
                        self.file,
                        f"column {column}",
                        f"{hidden} more rows",
                        self._allowed[(column, problem)],
                        f"{problem} (in {count} rows in all; the first {ISSUES_PER_KIND} are listed)",
                    )
                )
        return out
