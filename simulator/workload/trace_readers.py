"""Reading trace files into :class:`~simulator.workload.trace_table.TraceTable`.

:func:`load_trace` returns every problem it finds as an
:class:`~simulator.errors.Issue` (file-level problems with an empty key path,
cell problems as ``row N, column C`` where data rows count from 1: in CSV the
first line after the header is row 1, in JSONL row N is line N);
:func:`read_trace` raises them as one :class:`~simulator.errors.InputError`.

Rules (documented in ``docs/workload.md``):

* Token counts must be whole numbers. Generic formats (csv, jsonl) require
  them >= 1. Real formats (azure, mooncake, vidur) accept 0 but skip such rows
  (a request that reads or writes nothing cannot be served); the number
  skipped is :attr:`TraceTable.dropped_rows`.
* Token counts are at most :data:`~simulator.workload.trace_table.MAX_REQUEST_TOKENS`.
* Arrival times must be finite and non-decreasing in every format; they are
  returned in seconds after the first row's arrival.
* No line may be longer than :data:`MAX_TRACE_LINE_BYTES`; this is checked
  before parsing, so a huge cell costs neither time nor memory.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from simulator.errors import InputError, Issue, make_issue
from simulator.input_files import file_problem
from simulator.suggest import did_you_mean
from simulator.workload.arrays import FloatArray, IntArray, StrArray, text_array
from simulator.workload.issue_collector import RowIssues
from simulator.workload.trace_formats import (
    FORMAT_CHOICES,
    GENERIC_NAME_COLUMNS,
    Layout,
    detect_format,
    layout_for,
    repeated_columns,
)
from simulator.workload.trace_table import MAX_REQUEST_TOKENS, TraceTable

BoolArray = npt.NDArray[np.bool_]

MAX_TRACE_LINE_BYTES = 2**20
"""Longest line (header, CSV row or JSONL record) a trace file may have (1 MiB)."""

_QUOTED_BYTES = 60


def _overlong_line(path: Path) -> tuple[int, int, str] | None:
    """Find the first line longer than :data:`MAX_TRACE_LINE_BYTES`, reading in bounded pieces.

    Returns:
        ``(line number, length in bytes, its first bytes as text)``, or None.
    """
    with path.open("rb") as stream:
        for number, line in enumerate(
            iter(lambda: stream.readline(MAX_TRACE_LINE_BYTES + 1), b""), 1
        ):
            if len(line) <= MAX_TRACE_LINE_BYTES:
                continue
            head = line[:_QUOTED_BYTES].decode("utf-8", errors="replace")
            length = len(line)
            while not line.endswith(b"\n"):
                line = stream.readline(MAX_TRACE_LINE_BYTES)
                if not line:
                    break
                length += len(line)
            return number, length, head
    return None


class _Raw:
    """The cells of a trace file as read, before any checks.

    Attributes:
        columns: Column name -> cells (text for CSV, JSON values for JSONL;
            None for a JSONL record without that key).
        rows: The row number of each record.
    """

    def __init__(self, columns: dict[str, pd.Series], rows: IntArray) -> None:
        self.columns = columns
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)


def _read_csv(path: Path, issues: RowIssues) -> _Raw | None:
    try:
        frame = pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            encoding="utf-8-sig",
            skipinitialspace=True,
        )
    except pd.errors.EmptyDataError:
        issues.add_file_issue("", "(empty file)", "a header line and data rows", "empty trace")
        return None
    except (pd.errors.ParserError, csv.Error) as exc:
        message = str(exc).strip().splitlines()[-1]
        issues.add_file_issue("", message, "well-formed CSV", "cannot parse the trace")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        issues.add_file_issue("", str(exc), "a readable UTF-8 CSV file", "cannot read the trace")
        return None
    columns = {str(name).strip(): frame[name].astype(object) for name in frame.columns}
    return _Raw(columns, np.arange(1, len(frame) + 1, dtype=np.int64))


def _read_jsonl(path: Path, issues: RowIssues) -> _Raw | None:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        issues.add_file_issue("", str(exc), "a readable UTF-8 JSONL file", "cannot read the trace")
        return None
    records: list[dict[str, object]] = []
    rows: list[int] = []
    for number, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            issues.add(number, "(line)", line.strip(), "one JSON object per line", exc.msg)
            continue
        if not isinstance(record, dict):
            issues.add(number, "(line)", record, "one JSON object per line", "not an object")
            continue
        records.append(record)
        rows.append(number)
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(str(k) for k in record))
    columns = {
        name: pd.Series([record.get(name) for record in records], dtype=object) for name in names
    }
    return _Raw(columns, np.asarray(rows, dtype=np.int64))


def _numbers(cells: pd.Series) -> tuple[FloatArray, BoolArray]:
    """Return cells as floats (NaN where not a number) and a mask of empty cells."""
    values = np.full(len(cells), np.nan)
    missing = np.zeros(len(cells), dtype=bool)
    for index, cell in enumerate(cells.tolist()):
        if cell is None or (isinstance(cell, str) and not cell.strip()):
            missing[index] = True
        elif isinstance(cell, bool):
            continue
        elif isinstance(cell, (int, float)):
            values[index] = float(cell)
        elif isinstance(cell, str):
            try:
                values[index] = float(cell.strip())
            except ValueError:
                continue
    return values, missing


def _numbers_fast(cells: pd.Series) -> tuple[FloatArray, BoolArray]:
    """Like :func:`_numbers`, vectorised, for CSV cells (all text)."""
    text = cells.astype(str).str.strip()
    missing = (text == "").to_numpy()
    values = pd.to_numeric(text.where(~missing, "nan"), errors="coerce").astype(float)
    return values.to_numpy(dtype=np.float64), missing


def _cell_numbers(cells: pd.Series, container: str) -> tuple[FloatArray, BoolArray]:
    return _numbers_fast(cells) if container == "csv" else _numbers(cells)


def _tokens(
    raw: _Raw, column: str, layout: Layout, issues: RowIssues
) -> tuple[IntArray, BoolArray]:
    """Parse a token-count column; return counts (0 where bad) and a mask of good rows."""
    values, missing = _cell_numbers(raw.columns[column], layout.container)
    cells = raw.columns[column].tolist()
    floor = 1 if layout.generic else 0
    allowed = (
        f"a whole number >= 1 and <= {MAX_REQUEST_TOKENS}"
        if layout.generic
        else f"a whole number >= 0 and <= {MAX_REQUEST_TOKENS} (0 skips the row)"
    )
    finite = np.isfinite(values)
    whole = finite & (np.floor(np.where(finite, values, 0.0)) == np.where(finite, values, 0.0))
    small = whole & (values < floor)
    large = whole & (values > MAX_REQUEST_TOKENS)
    for index in np.flatnonzero(missing | ~finite | ~whole | small | large):
        row = int(raw.rows[index])
        if missing[index]:
            issues.add(row, column, "(empty)", allowed, "missing value")
        elif not finite[index]:
            issues.add(row, column, cells[index], allowed, "not a finite number")
        elif not whole[index]:
            issues.add(row, column, cells[index], allowed, "not a whole number")
        elif large[index]:
            issues.add(row, column, cells[index], allowed, "too large")
        else:
            issues.add(row, column, cells[index], allowed, "too small")
    good = whole & ~small & ~large & ~missing
    counts = np.where(good, values, 0.0).astype(np.int64)
    return counts, good


def _datetimes_s(cells: pd.Series) -> FloatArray:
    """Parse date-time text to seconds after the earliest parsed value (NaN if bad)."""
    text = cells.astype(str).str.strip()
    try:
        stamps = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
    except (ValueError, TypeError):
        return np.full(len(cells), np.nan)
    valid = stamps.notna().to_numpy()
    seconds = np.full(len(cells), np.nan)
    if valid.any():
        kept = stamps[valid]
        seconds[valid] = (kept - kept.iloc[0]).dt.total_seconds().to_numpy(dtype=np.float64)
    return seconds


def _times(raw: _Raw, layout: Layout, issues: RowIssues) -> tuple[FloatArray, BoolArray]:
    """Parse and check the arrival column; return seconds and a mask of good rows."""
    column = layout.time_column
    assert column is not None
    cells = raw.columns[column]
    if layout.time_units_per_s == 0.0:
        seconds = _datetimes_s(cells)
        missing = (cells.astype(str).str.strip() == "").to_numpy()
        allowed = "a date-time such as 2023-11-16 18:15:46.6805900"
    else:
        values, missing = _cell_numbers(cells, layout.container)
        seconds = values / layout.time_units_per_s
        allowed = "a finite number" + (" (seconds)" if layout.time_units_per_s == 1.0 else " (ms)")
    good = np.isfinite(seconds) & ~missing
    listed = cells.tolist()
    for index in np.flatnonzero(~good):
        problem = "missing value" if missing[index] else "not a valid time"
        issues.add(int(raw.rows[index]), column, listed[index], allowed, problem)
    checked = np.flatnonzero(good)
    times = seconds[checked]
    for position in np.flatnonzero(np.diff(times) < 0) + 1:
        at = int(checked[position])
        previous = int(checked[position - 1])
        issues.add(
            int(raw.rows[at]),
            column,
            listed[at],
            f"a time >= the previous row's ({listed[previous]}, row {int(raw.rows[previous])})",
            "arrival times go backwards (rows must be sorted by arrival)",
        )
    return seconds, good


def _names(raw: _Raw, column: str, issues: RowIssues) -> StrArray:
    """Parse an optional text column; empty cells (or JSON null) become ""."""
    out: list[str] = []
    for index, cell in enumerate(raw.columns[column].tolist()):
        if cell is None:
            out.append("")
        elif isinstance(cell, str):
            out.append(cell.strip())
        else:
            issues.add(int(raw.rows[index]), column, cell, "a text name (or empty)", "not text")
            out.append("")
    return text_array(out, len(out)) if out else text_array("", 0)


def _check_columns(raw: _Raw, layout: Layout, issues: RowIssues) -> bool:
    """Report missing and (for generic formats) unknown columns; True when usable."""
    if layout.container == "csv":
        # A header naming a column twice makes the file unusable; it is reported by
        # the name as written (pandas has renamed the repeat ``x.1``).
        repeated = repeated_columns(issues.file)
        for name, first, again in repeated:
            issues.add_file_issue(
                f"column {name}",
                name,
                "each column named once in the header",
                f"repeated column: header fields {first} and {again} have the same name",
            )
        if repeated:
            return False
    present = list(raw.columns)
    required = [layout.prompt_column, layout.output_column]
    if layout.time_column is not None and not layout.generic:
        required.insert(0, layout.time_column)
    known = list(layout.known_columns())
    usable = True
    for name in required:
        if name not in raw.columns:
            usable = False
            hint = did_you_mean(name, present)
            issues.add_file_issue(
                f"column {name}",
                "(missing)",
                f"format {layout.name} needs columns " + ", ".join(required),
                f"missing column{hint}",
            )
    if layout.generic:
        for name in present:
            if name not in known:
                hint = did_you_mean(name, known)
                issues.add_file_issue(
                    f"column {name}",
                    name,
                    "columns " + ", ".join(known),
                    f"unknown column{hint}",
                )
    return usable


def _parse(raw: _Raw, path: Path, layout: Layout, issues: RowIssues) -> TraceTable | None:
    if not _check_columns(raw, layout, issues):
        return None
    if len(raw) == 0:
        issues.add_file_issue("", "(no data rows)", "at least one request row", "empty trace")
        return None
    prompt, prompt_ok = _tokens(raw, layout.prompt_column, layout, issues)
    output, output_ok = _tokens(raw, layout.output_column, layout, issues)
    arrival: FloatArray | None = None
    if layout.time_column is not None and layout.time_column in raw.columns:
        arrival, _ = _times(raw, layout, issues)
    named = {
        name: _names(raw, name, issues)
        for name in GENERIC_NAME_COLUMNS
        if layout.generic and name in raw.columns
    }
    if issues:
        return None
    keep = prompt_ok & output_ok & (prompt > 0) & (output > 0)
    if not keep.any():
        issues.add_file_issue(
            "",
            f"{len(raw)} rows",
            "at least one row with both lengths >= 1",
            "every row is skipped",
        )
        return None
    if arrival is not None:
        arrival = arrival - arrival[np.flatnonzero(keep)[0]]
    return TraceTable(
        path=path,
        format=layout.name,
        prompt_tokens=prompt[keep],
        output_tokens=output[keep],
        arrival_s=None if arrival is None else arrival[keep],
        slo_class=named["slo_class"][keep] if "slo_class" in named else None,
        origin=named["origin"][keep] if "origin" in named else None,
        source_rows=raw.rows[keep],
        dropped_rows=int((~keep).sum()),
    )


def load_trace(path: Path, fmt: str = "auto") -> tuple[TraceTable | None, list[Issue]]:
    """Read a trace file, returning the table or every problem found.

    Args:
        path: The trace file.
        fmt: One of :data:`~simulator.workload.trace_formats.FORMAT_CHOICES`;
            ``auto`` detects the format from the extension and first line.

    Returns:
        ``(table, [])`` on success, ``(None, issues)`` otherwise.
    """
    issues = RowIssues(path)
    if fmt not in FORMAT_CHOICES:
        issues.add_file_issue(
            "format", fmt, "one of " + ", ".join(FORMAT_CHOICES), "unknown format"
        )
        return None, issues.issues()
    problem = file_problem(path)
    if problem is not None:
        issues.add_file_issue("", str(path), "an existing trace file", f"trace file {problem}")
        return None, issues.issues()
    try:
        overlong = _overlong_line(path)
    except OSError as exc:
        issues.add_file_issue("", str(exc), "a readable trace file", "cannot read the trace")
        return None, issues.issues()
    if overlong is not None:
        number, length, head = overlong
        issues.add_file_issue(
            f"line {number}",
            head + "...",
            f"lines of at most {MAX_TRACE_LINE_BYTES} bytes",
            f"line of {length} bytes is too long",
        )
        return None, issues.issues()
    try:
        layout = layout_for(path, detect_format(path) if fmt == "auto" else fmt)
    except (OSError, UnicodeDecodeError) as exc:
        issues.add_file_issue("", str(exc), "a readable UTF-8 text file", "cannot read the trace")
        return None, issues.issues()
    raw = _read_csv(path, issues) if layout.container == "csv" else _read_jsonl(path, issues)
    table = None if raw is None else _parse(raw, path, layout, issues)
    if table is None:
        found = issues.issues()
        return None, found or [
            make_issue(path, "", str(path), "a trace file", "cannot read the trace")
        ]
    return table, []


def read_trace(path: Path, fmt: str = "auto") -> TraceTable:
    """Read a trace file (see :func:`load_trace`).

    Raises:
        InputError: With every problem found in the file.
    """
    table, issues = load_trace(path, fmt)
    if table is None:
        raise InputError(issues)
    return table
