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

All checks work on whole columns with pandas; only the reported rows are
visited one by one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

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
    text = raw.cells[rule.name].to_numpy(dtype=object)
    column = _Column(raw.file, rule, order, text, raw.cells.index.to_numpy(dtype=np.int64))
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
    numbers = np.asarray(pd.to_numeric(text, errors="coerce"), dtype=np.float64)
    nan_text = np.isin(np.char.lower(text.astype(str)), np.array(sorted(_NAN_TEXT), dtype=str))
    unparsed = np.isnan(numbers) & ~empty & ~nan_text
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


def _key_text(values: Iterable[object]) -> str:
    return " ".join(f"{name}={value}" for name, value in zip(KEY_COLUMNS, values, strict=True))


def _point_text(values: Iterable[object]) -> str:
    return ", ".join(f"{name}={value}" for name, value in zip(AXIS_COLUMNS, values, strict=True))


def _check_fanout(parsed: pd.DataFrame, file: str, found: _Found) -> None:
    bad = parsed["phase"].isin(tuple(SINGLE_FANOUT_PHASES)) & (parsed["fanout_k"] != 1)
    order = column_names().index("fanout_k")
    rows = parsed.loc[bad, ["phase", "fanout_k"]].head(MAX_ISSUES + 1)
    for line, phase, fanout_k in zip(
        rows.index.tolist(), rows["phase"].tolist(), rows["fanout_k"].tolist(), strict=True
    ):
        found.add(
            int(line),
            order,
            make_issue(
                file,
                f"row {int(line)}, column fanout_k",
                int(fanout_k),
                "1 for " + " and ".join(sorted(SINGLE_FANOUT_PHASES)) + " rows",
                f"fanout_k must be 1 for a {phase} row",
            ),
        )
    found.count_only(max(0, int(bad.sum()) - (MAX_ISSUES + 1)))


def _check_duplicates(parsed: pd.DataFrame, file: str, found: _Found) -> bool:
    columns = list(KEY_COLUMNS + AXIS_COLUMNS)
    repeated = parsed.duplicated(subset=columns, keep="first")
    count = int(repeated.sum())
    if count == 0:
        return False
    lines = pd.Series(parsed.index, index=parsed.index)
    first_line = lines.groupby([parsed[c] for c in columns], sort=False).transform("min")
    for line in parsed.index[repeated.to_numpy()][: MAX_ISSUES + 1]:
        row = parsed.loc[line]
        found.add(
            int(line),
            len(columns),
            make_issue(
                file,
                f"row {int(line)}",
                _point_text(int(row[c]) for c in AXIS_COLUMNS),
                "one row per key and grid point (" + ", ".join(KEY_COLUMNS + AXIS_COLUMNS) + ")",
                f"duplicate grid point: row {int(first_line.at[line])} has the same "
                + _key_text(row[c] for c in KEY_COLUMNS)
                + " and point",
            ),
        )
    found.count_only(max(0, count - (MAX_ISSUES + 1)))
    return True


def _check_complete(parsed: pd.DataFrame, file: str, found: _Found) -> None:
    groups = parsed.groupby(list(KEY_COLUMNS), sort=False)
    for key_values, group in groups:
        axes = [sorted(int(v) for v in group[c].unique()) for c in AXIS_COLUMNS]
        expected = len(axes[0]) * len(axes[1]) * len(axes[2])
        if len(group) == expected:
            continue
        present = set(zip(*(group[c].astype(int).tolist() for c in AXIS_COLUMNS), strict=True))
        missing = [p for p in itertools.product(*axes) if p not in present]
        named = "; ".join(_point_text(p) for p in missing[:MAX_MISSING_POINTS])
        if len(missing) > MAX_MISSING_POINTS:
            named += f"; ... ({len(missing) - MAX_MISSING_POINTS} more)"
        grid = " x ".join(
            f"{name} {{{', '.join(str(v) for v in axis)}}}"
            for name, axis in zip(AXIS_COLUMNS, axes, strict=True)
        )
        found.add(
            int(group.index.min()),
            len(KEY_COLUMNS + AXIS_COLUMNS) + 1,
            make_issue(
                file,
                f"rows with {_key_text(key_values)}",
                f"{len(group)} rows",
                f"a row for every point of {grid}",
                f"incomplete grid: {len(missing)} of {expected} points missing: {named}",
            ),
        )


def check_lut(raw: RawLut) -> tuple[list[Issue], pd.DataFrame]:
    """Check a LUT's text cells; return its problems and its parsed rows.

    The parsed rows hold one column per schema column (optional columns
    filled with their default), key and enum columns as text, whole-number
    columns as ``int64``, numbers as ``float64``, indexed by line number.
    They are only meaningful when the issue list is empty.
    """
    found = _Found(raw.file)
    _check_header(raw, found)
    parsed: dict[str, npt.NDArray[Any]] = {}
    for order, rule in enumerate(column_rules()):
        if rule.name in raw.cells.columns:
            parsed[rule.name] = _check_column(raw, rule, order, found)
        elif not rule.required:
            parsed[rule.name] = np.full(len(raw.cells), rule.default, dtype=object)
    if found.total:
        return found.issues(), pd.DataFrame(parsed, index=raw.cells.index)
    for rule in column_rules():
        if rule.kind == "integer":
            parsed[rule.name] = parsed[rule.name].astype(np.int64)
    frame = pd.DataFrame(parsed, index=raw.cells.index)
    _check_fanout(frame, raw.file, found)
    if not _check_duplicates(frame, raw.file, found):
        _check_complete(frame, raw.file, found)
    return found.issues(), frame
