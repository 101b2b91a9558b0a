"""Whole-column checks of a LUT table and its grids.

:func:`check_lut` runs three stages on the text cells of a file and returns
every problem found (up to :data:`MAX_ISSUES`, plus one line counting the
rest):

1. header: missing required columns, unknown columns (with a "did you mean"
   hint) and repeated column names;
2. cells: empty required cells, non-numeric text in numeric columns, NaN and
   infinite values, fractions in whole-number columns, values below the
   schema's minimum or above the bounds of :mod:`simulator.limits`, values
   outside an enum;
3. grids (only when the first two stages found nothing): ``fanout_k`` of 1
   for prefill and draft_decode rows, duplicate grid points, and, for every
   key, a complete rectangular grid over context_len x microbatch x fanout_k.

Cell checks work on whole columns with numpy; the grid checks visit each row
once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from simulator.errors import Issue, make_issue
from simulator.lut.read import RawLut
from simulator.lut.schema import (
    AXIS_COLUMNS,
    KEY_COLUMNS,
    SINGLE_FANOUT_PHASES,
    ColumnRule,
    column_names,
    column_rules,
)
from simulator.suggest import did_you_mean

MAX_ISSUES = 20
"""Most problems listed for one file; the rest are counted in one extra line."""

MAX_MISSING_POINTS = 5
"""Most missing grid points named for one incomplete grid."""

_NAN_TEXT = frozenset({"nan", "+nan", "-nan"})


@dataclass
class _Found:
    """Problems found so far, kept sorted by where they are in the file."""

    file: str
    entries: list[tuple[int, int, Issue]] = field(default_factory=list)
    total: int = 0

    def add(self, line: int, order: int, issue: Issue) -> None:
        self.total += 1
        self.entries.append((line, order, issue))

    def count_only(self, extra: int) -> None:
        self.total += extra

    def issues(self) -> list[Issue]:
        ordered = [issue for _, _, issue in sorted(self.entries, key=lambda e: (e[0], e[1]))]
        shown = ordered[:MAX_ISSUES]
        hidden = self.total - len(shown)
        if hidden > 0:
            shown.append(
                make_issue(
                    self.file,
                    "",
                    f"{hidden} more",
                    "a LUT file without problems",
                    f"further problems not listed (only the first {MAX_ISSUES} are shown)",
                )
            )
        return shown


def _check_header(raw: RawLut, found: _Found) -> None:
    known = column_names()
    allowed = "columns " + ", ".join(known)
    seen: set[str] = set()
    for position, name in enumerate(raw.header, start=1):
        where = f"header, column {position}"
        if not name:
            found.add(1, position, make_issue(raw.file, where, "", allowed, "column has no name"))
        elif name in seen:
            found.add(1, position, make_issue(raw.file, where, name, allowed, "repeated column"))
        elif name not in known:
            hint = did_you_mean(name, known)
            found.add(
                1, position, make_issue(raw.file, where, name, allowed, f"unknown column{hint}")
            )
        seen.add(name)
    for order, rule in enumerate(column_rules()):
        if rule.required and rule.name not in seen:
            found.add(
                1,
                len(raw.header) + order + 1,
                make_issue(
                    raw.file,
                    "header",
                    "(missing)",
                    f"a column named {rule.name!r} ({rule.description})",
                    f"missing required column {rule.name!r}",
                ),
            )


BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class _Column:
    """One column's text cells and the line number of each."""

    file: str
    rule: ColumnRule
    order: int
    text: npt.NDArray[np.object_]
    lines: npt.NDArray[np.int64]


def _report(
    found: _Found, column: _Column, mask: BoolArray, problem: str, hints: tuple[str, ...] = ()
) -> None:
    """Add an issue for every row where ``mask`` holds (visiting at most MAX_ISSUES + 1)."""
    rows = np.flatnonzero(mask)
    if rows.size == 0:
        return
    rule = column.rule
    for row in rows[: MAX_ISSUES + 1].tolist():
        value = str(column.text[row])
        line = int(column.lines[row])
        text = problem + (did_you_mean(value, hints) if hints else "")
        found.add(
            line,
            column.order,
            make_issue(
                column.file,
                f"row {line}, column {rule.name}",
                value if value else "(empty)",
                rule.allowed(),
                text,
            ),
        )
    found.count_only(max(0, int(rows.size) - (MAX_ISSUES + 1)))


def _check_column(
    raw: RawLut, rule: ColumnRule, order: int, found: _Found
) -> npt.NDArray[np.object_] | npt.NDArray[np.float64]:
    """Check one column; return its parsed values (text, or numbers as floats)."""
    text = raw.cells[rule.name]
    column = _Column(raw.file, rule, order, text, raw.lines)
    empty: BoolArray = text == ""
    if rule.required or rule.min_length > 0:
        _report(found, column, empty, "missing value")
    if rule.kind == "enum":
        allowed = np.isin(text.astype(str), np.array(rule.choices, dtype=str))
        _report(found, column, ~empty & ~allowed, "not an allowed value", rule.choices)
        return text
    if rule.kind == "string":
        filled: npt.NDArray[np.object_] = np.where(empty, rule.default, text).astype(object)
        return filled
    numbers = _numbers(text)
    missing = np.isnan(numbers)
    nan_text = np.zeros(len(text), dtype=np.bool_)
    if missing.any():
        nan_text[missing] = [str(cell).lower() in _NAN_TEXT for cell in text[missing]]
    unparsed = missing & ~empty & ~nan_text
    infinite = np.isinf(numbers)
    finite = np.isfinite(numbers)
    _report(found, column, unparsed, "not a number")
    _report(found, column, nan_text, "NaN is not allowed")
    _report(found, column, infinite, "not finite")
    good = finite
    if rule.kind == "integer":
        fraction = finite & (numbers != np.floor(np.where(finite, numbers, 0.0)))
        _report(found, column, fraction, "not a whole number")
        good = finite & ~fraction
    if rule.minimum is not None:
        _report(found, column, good & (np.where(good, numbers, 0.0) < rule.minimum), "too small")
    if rule.maximum is not None:
        _report(found, column, good & (np.where(good, numbers, 0.0) > rule.maximum), "too large")
    return numbers


def _numbers(text: npt.NDArray[np.object_]) -> npt.NDArray[np.float64]:
    """Each cell's number, NaN where a cell is not one."""
    if not _has_underscore(text):
        try:  # every cell a number: one conversion
            return text.astype(np.float64)
        except ValueError:
            pass
    return np.fromiter((_number(cell) for cell in text), dtype=np.float64, count=len(text))


def _has_underscore(text: npt.NDArray[np.object_]) -> bool:
    """Whether any cell holds ``_`` (a digit separator, which ``float`` would accept)."""
    try:
        return "_" in "".join(text)  # one pass in C over cells that are all text
    except TypeError:
        return any("_" in str(cell) for cell in text)


def _number(cell: object) -> float:
    """A cell's number, or NaN when it is not one (digit separators are not numbers)."""
    text = str(cell)
    if "_" in text:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _key_text(values: Iterable[object]) -> str:
    return " ".join(f"{name}={value}" for name, value in zip(KEY_COLUMNS, values, strict=True))


def _point_text(values: Iterable[object]) -> str:
    return ", ".join(f"{name}={value}" for name, value in zip(AXIS_COLUMNS, values, strict=True))


@dataclass(frozen=True)
class ParsedLut:
    """A checked LUT's rows, one array per schema column.

    Key and enum columns hold text, whole-number columns ``int64`` (once the
    cells passed their checks), numbers ``float64``; optional columns absent
    from the file hold their default. ``lines`` is each row's line number.
    """

    columns: dict[str, npt.NDArray[Any]]
    lines: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.lines)

    @cached_property
    def keys(self) -> list[tuple[object, ...]]:
        """Each row's key (the :data:`KEY_COLUMNS` values)."""
        return list(zip(*(self.columns[c].tolist() for c in KEY_COLUMNS), strict=True))

    @cached_property
    def points(self) -> list[tuple[int, int, int]]:
        """Each row's grid point (the :data:`AXIS_COLUMNS` values)."""
        context, batch, fanout = (self.columns[c].tolist() for c in AXIS_COLUMNS)
        return list(zip(context, batch, fanout, strict=True))

    @cached_property
    def groups(self) -> dict[tuple[object, ...], list[int]]:
        """The rows of each key, keys in order of first appearance, rows in file order."""
        found: dict[tuple[object, ...], list[int]] = {}
        for row, key in enumerate(self.keys):
            found.setdefault(key, []).append(row)
        return found


def _check_fanout(parsed: ParsedLut, file: str, found: _Found) -> None:
    phase = parsed.columns["phase"]
    fanout = parsed.columns["fanout_k"]
    bad = np.isin(phase.astype(str), sorted(SINGLE_FANOUT_PHASES)) & (fanout != 1)
    order = column_names().index("fanout_k")
    rows = np.flatnonzero(bad)
    for row in rows[: MAX_ISSUES + 1].tolist():
        line = int(parsed.lines[row])
        found.add(
            line,
            order,
            make_issue(
                file,
                f"row {line}, column fanout_k",
                int(fanout[row]),
                "1 for " + " and ".join(sorted(SINGLE_FANOUT_PHASES)) + " rows",
                f"fanout_k must be 1 for a {phase[row]} row",
            ),
        )
    found.count_only(max(0, int(rows.size) - (MAX_ISSUES + 1)))


def _check_duplicates(parsed: ParsedLut, file: str, found: _Found) -> bool:
    columns = KEY_COLUMNS + AXIS_COLUMNS
    if len(set(zip(parsed.keys, parsed.points, strict=True))) == len(parsed):
        return False  # every (key, point) once: nothing to report
    first_row: dict[tuple[object, ...], int] = {}
    repeated: list[tuple[int, int]] = []  # (row, the first row with its key and point)
    for row, entry in enumerate(zip(parsed.keys, parsed.points, strict=True)):
        whole = entry[0] + entry[1]
        first = first_row.setdefault(whole, row)
        if first != row:
            repeated.append((row, first))
    if not repeated:
        return False
    for row, first in repeated[: MAX_ISSUES + 1]:
        line = int(parsed.lines[row])
        key = tuple(parsed.columns[c][row] for c in KEY_COLUMNS)
        found.add(
            line,
            len(columns),
            make_issue(
                file,
                f"row {line}",
                _point_text(int(parsed.columns[c][row]) for c in AXIS_COLUMNS),
                "one row per key and grid point (" + ", ".join(columns) + ")",
                f"duplicate grid point: row {int(parsed.lines[first])} has the same "
                + _key_text(key)
                + " and point",
            ),
        )
    found.count_only(max(0, len(repeated) - (MAX_ISSUES + 1)))
    return True


def _check_complete(parsed: ParsedLut, file: str, found: _Found) -> None:
    points = parsed.points
    for key_values, rows in parsed.groups.items():
        present = {points[row] for row in rows}
        axes = [sorted({point[axis] for point in present}) for axis in range(len(AXIS_COLUMNS))]
        expected = len(axes[0]) * len(axes[1]) * len(axes[2])
        if len(rows) == expected:
            continue
        missing = [p for p in itertools.product(*axes) if p not in present]
        named = "; ".join(_point_text(p) for p in missing[:MAX_MISSING_POINTS])
        if len(missing) > MAX_MISSING_POINTS:
            named += f"; ... ({len(missing) - MAX_MISSING_POINTS} more)"
        grid = " x ".join(
            f"{name} {{{', '.join(str(v) for v in axis)}}}"
            for name, axis in zip(AXIS_COLUMNS, axes, strict=True)
        )
        found.add(
            int(min(parsed.lines[row] for row in rows)),
            len(KEY_COLUMNS + AXIS_COLUMNS) + 1,
            make_issue(
                file,
                f"rows with {_key_text(key_values)}",
                f"{len(rows)} rows",
                f"a row for every point of {grid}",
                f"incomplete grid: {len(missing)} of {expected} points missing: {named}",
            ),
        )


def check_lut(raw: RawLut) -> tuple[list[Issue], ParsedLut]:
    """Check a LUT's text cells; return its problems and its parsed rows.

    The parsed rows (:class:`ParsedLut`) are only meaningful when the issue
    list is empty.
    """
    found = _Found(raw.file)
    _check_header(raw, found)
    parsed: dict[str, npt.NDArray[Any]] = {}
    for order, rule in enumerate(column_rules()):
        if rule.name in raw.cells:
            parsed[rule.name] = _check_column(raw, rule, order, found)
        elif not rule.required:
            parsed[rule.name] = np.full(raw.rows, rule.default, dtype=object)
    if found.total:
        return found.issues(), ParsedLut(parsed, raw.lines)
    for rule in column_rules():
        if rule.kind == "integer":
            parsed[rule.name] = parsed[rule.name].astype(np.int64)
    table = ParsedLut(parsed, raw.lines)
    _check_fanout(table, raw.file, found)
    if not _check_duplicates(table, raw.file, found):
        _check_complete(table, raw.file, found)
    return found.issues(), table
