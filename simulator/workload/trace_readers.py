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
* No line may be longer than :data:`MAX_TRACE_LINE_BYTES`; each line is
  checked as it is read, so a huge cell costs neither time nor memory.
* The file is read in chunks of rows (:mod:`simulator.workload.trace_chunks`);
  a source trace is read only up to the end of its slice (:class:`TraceStop`)
  and no file beyond :data:`~simulator.limits.MAX_TRACE_ROWS` rows.

A well-formed trace is read without pandas (:mod:`.trace_fast`,
:mod:`.trace_fast_jsonl`: the same table to the last bit); any other file, or
one with any problem, is read by the general reader here, which imports
pandas only then.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from simulator.errors import InputError, Issue, make_issue
from simulator.input_files import file_problem
from simulator.limits import MAX_TRACE_ROWS
from simulator.suggest import did_you_mean
from simulator.workload.arrays import FloatArray, IntArray, StrArray, text_array
from simulator.workload.issue_collector import RowIssues
from simulator.workload.trace_chunks import (
    MAX_TRACE_LINE_BYTES,
    RawChunk,
    RowProblem,
    TraceFileError,
    check_first_line,
    csv_chunks,
    jsonl_chunks,
)
from simulator.workload.trace_fast import FastCsv, FastFile, NotFast
from simulator.workload.trace_fast_jsonl import FastJsonl
from simulator.workload.trace_formats import (
    FORMAT_CHOICES,
    GENERIC_NAME_COLUMNS,
    PREFIX_COLUMN,
    Layout,
    detect_format,
    layout_for,
    repeated_columns,
)
from simulator.workload.trace_stop import TraceStop
from simulator.workload.trace_table import MAX_REQUEST_TOKENS, TraceTable

if TYPE_CHECKING:
    import pandas as pd

BoolArray = npt.NDArray[np.bool_]
ObjArray = npt.NDArray[np.object_]

__all__ = ["MAX_TRACE_LINE_BYTES", "TraceStop", "load_trace", "read_trace"]


class _Pending:
    """Row problems of one chunk, held until the reader knows which of its rows it keeps."""

    def __init__(self) -> None:
        self.items: list[RowProblem] = []

    def add(self, row: int, column: str, value: object, allowed: str, problem: str) -> None:
        self.items.append((row, column, value, allowed, problem))

    def replay(self, target: RowIssues, last_row: int | None) -> None:
        """Record the problems of rows up to ``last_row`` (None: all) in ``target``."""
        for row, column, value, allowed, problem in self.items:
            if last_row is None or row <= last_row:
                target.add(row, column, value, allowed, problem)


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
            try:
                values[index] = float(cell)
            except OverflowError:  # a JSON integer beyond float range: not a finite number
                continue
        elif isinstance(cell, str):
            try:
                values[index] = float(cell.strip())
            except ValueError:
                continue
    return values, missing


def _numbers_fast(cells: pd.Series) -> tuple[FloatArray, BoolArray]:
    """Like :func:`_numbers`, vectorised, for CSV cells (all text)."""
    import pandas as pd

    text = cells.astype(str).str.strip()
    missing = (text == "").to_numpy()
    values = pd.to_numeric(text.where(~missing, "nan"), errors="coerce").astype(float)
    return values.to_numpy(dtype=np.float64), missing


def _cell_numbers(cells: pd.Series, container: str) -> tuple[FloatArray, BoolArray]:
    return _numbers_fast(cells) if container == "csv" else _numbers(cells)


def _tokens(
    raw: RawChunk, column: str, layout: Layout, issues: _Pending
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


@dataclass
class _Clock:
    """What parsing the arrival column carries from one chunk to the next.

    Attributes:
        reference: The first parsed date-time of the file (date-time columns
            count seconds from it).
        last: ``(seconds, cell, row)`` of the last row with a valid time.
    """

    reference: pd.Timestamp | None = None
    last: tuple[float, object, int] | None = None


def _datetimes_s(cells: pd.Series, clock: _Clock) -> FloatArray:
    """Parse date-time text to seconds after the file's first parsed value (NaN if bad)."""
    import pandas as pd

    text = cells.astype(str).str.strip()
    try:
        stamps = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
    except (ValueError, TypeError):
        return np.full(len(cells), np.nan)
    valid = stamps.notna().to_numpy()
    seconds = np.full(len(cells), np.nan)
    if valid.any():
        kept = stamps[valid]
        if clock.reference is None:
            clock.reference = kept.iloc[0]
        seconds[valid] = (kept - clock.reference).dt.total_seconds().to_numpy(dtype=np.float64)
    return seconds


def _times(
    raw: RawChunk, layout: Layout, issues: _Pending, clock: _Clock
) -> tuple[FloatArray, BoolArray]:
    """Parse and check the arrival column; return seconds and a mask of good rows."""
    column = layout.time_column
    assert column is not None
    cells = raw.columns[column]
    if layout.time_units_per_s == 0.0:
        seconds = _datetimes_s(cells, clock)
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
    before = clock.last
    previous_times = times[:-1] if before is None else np.concatenate(([before[0]], times[:-1]))
    start = 0 if before is not None else 1
    for position in np.flatnonzero(times[start:] < previous_times) + start:
        at = int(checked[position])
        if position > 0:
            earlier, earlier_row = (
                listed[int(checked[position - 1])],
                raw.rows[checked[position - 1]],
            )
        else:
            assert before is not None
            earlier, earlier_row = before[1], before[2]
        issues.add(
            int(raw.rows[at]),
            column,
            listed[at],
            f"a time >= the previous row's ({earlier}, row {int(earlier_row)})",
            "arrival times go backwards (rows must be sorted by arrival)",
        )
    if len(checked):
        last = int(checked[-1])
        clock.last = (float(seconds[last]), listed[last], int(raw.rows[last]))
    return seconds, good


def _names(raw: RawChunk, column: str, issues: _Pending) -> StrArray:
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


PREFIX_ALLOWED = "block ids: whole numbers >= 0, space-separated (CSV) or a JSON list (or empty)"


def _block_ids(raw: RawChunk, issues: _Pending) -> ObjArray:
    """Parse the ``hash_ids`` column: one tuple of block ids per row (empty: none)."""
    out = np.empty(len(raw), dtype=object)
    for index, cell in enumerate(raw.columns[PREFIX_COLUMN].tolist()):
        ids: tuple[int, ...] | None = ()
        if isinstance(cell, str):
            try:
                ids = tuple(int(part) for part in cell.split())
            except ValueError:
                ids = None
        elif isinstance(cell, list):
            if all(isinstance(v, int) and not isinstance(v, bool) for v in cell):
                ids = tuple(cell)
            else:
                ids = None
        elif cell is not None and not (isinstance(cell, float) and np.isnan(cell)):
            ids = None
        if ids is None or any(v < 0 for v in ids):
            issues.add(int(raw.rows[index]), PREFIX_COLUMN, cell, PREFIX_ALLOWED, "not block ids")
            ids = ()
        out[index] = ids
    return out


def _unknown_column(name: str, known: list[str], issues: RowIssues) -> None:
    issues.add_file_issue(
        f"column {name}",
        name,
        "columns " + ", ".join(known),
        f"unknown column{did_you_mean(name, known)}",
    )


def _check_columns(raw: RawChunk, layout: Layout, issues: RowIssues) -> bool:
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
                _unknown_column(name, known, issues)
    return usable


@dataclass
class _Part:
    """The parsed rows of one chunk.

    Attributes:
        rows: Row number of each row.
        prompt: Prompt lengths (0 where bad).
        output: Output lengths (0 where bad).
        keep: Rows kept (both lengths good and >= 1).
        seconds: Arrival seconds on the file's clock (None: no time column).
        good_time: Rows with a valid arrival time (None: no time column).
        names: Optional text columns read.
    """

    rows: IntArray
    prompt: IntArray
    output: IntArray
    keep: BoolArray
    seconds: FloatArray | None
    good_time: BoolArray | None
    names: dict[str, StrArray] = field(default_factory=dict)
    prefix: ObjArray | None = None

    def head(self, size: int) -> _Part:
        """The first ``size`` rows."""

        def cut(array: np.ndarray | None) -> np.ndarray | None:
            return None if array is None else array[:size]

        return _Part(
            self.rows[:size],
            self.prompt[:size],
            self.output[:size],
            self.keep[:size],
            cut(self.seconds),
            cut(self.good_time),
            {name: values[:size] for name, values in self.names.items()},
            cut(self.prefix),
        )


class _Reader:
    """Reads the chunks of one trace file, stopping once the rows of ``stop`` are read."""

    def __init__(
        self, path: Path, layout: Layout, issues: RowIssues, stop: TraceStop | None
    ) -> None:
        self.path = path
        self.layout = layout
        self.issues = issues
        self.stop = stop
        self.columns: list[str] | None = None
        self.reported: set[str] = set()
        self.clock = _Clock()
        self.parts: list[_Part] = []
        self.rows_read = 0
        self.zero: float | None = None
        self.in_slice = 0

    @property
    def has_time(self) -> bool:
        column = self.layout.time_column
        return column is not None and self.columns is not None and column in self.columns

    @property
    def has_prefix(self) -> bool:
        """Whether the file gives block ids (``hash_ids``; not read from azure or vidur)."""
        return (
            self.columns is not None
            and PREFIX_COLUMN in self.columns
            and self.layout.name not in ("azure", "vidur")
        )

    def first(self, raw: RawChunk) -> bool:
        """Take the file's columns from its first chunk; True when they are usable."""
        usable = _check_columns(raw, self.layout, self.issues)
        self.columns = list(raw.columns)
        self.reported = {name for name in raw.columns if name not in self.layout.known_columns()}
        return usable

    def conform(self, raw: RawChunk, pending: _Pending) -> RawChunk:
        """Give a later JSONL chunk the first chunk's columns (a key it lacks: all null)."""
        import pandas as pd

        assert self.columns is not None
        known = list(self.layout.known_columns())
        for name, cells in raw.columns.items():
            if name in self.columns:
                continue
            if (name in GENERIC_NAME_COLUMNS and self.layout.generic) or name == PREFIX_COLUMN:
                self.columns.append(name)
            elif name == self.layout.time_column:
                given = np.flatnonzero(cells.notna().to_numpy())
                if not given.size:
                    continue  # null in every record of the chunk: as if the key were absent
                index = int(given[0])
                pending.add(
                    int(raw.rows[index]),
                    name,
                    cells.iloc[index],
                    f"{name} in every record or in none (the first records have none)",
                    "arrival time in some records only",
                )
            elif self.layout.generic and name not in self.reported:
                self.reported.add(name)
                _unknown_column(name, known, self.issues)
        for name in self.columns:
            if name not in raw.columns:
                raw.columns[name] = pd.Series([None] * len(raw), dtype=object)
        return raw

    def parse(self, raw: RawChunk, pending: _Pending) -> _Part:
        """Parse one chunk, holding its row problems in ``pending``."""
        layout = self.layout
        assert self.columns is not None
        pending.items.extend(raw.line_problems)
        prompt, prompt_ok = _tokens(raw, layout.prompt_column, layout, pending)
        output, output_ok = _tokens(raw, layout.output_column, layout, pending)
        seconds: FloatArray | None = None
        good_time: BoolArray | None = None
        if self.has_time:
            seconds, good_time = _times(raw, layout, pending, self.clock)
        names = {
            name: _names(raw, name, pending)
            for name in GENERIC_NAME_COLUMNS
            if layout.generic and name in self.columns
        }
        keep = prompt_ok & output_ok & (prompt > 0) & (output > 0)
        prefix = _block_ids(raw, pending) if self.has_prefix else None
        return _Part(raw.rows, prompt, output, keep, seconds, good_time, names, prefix)

    def last_needed(self, part: _Part) -> int | None:
        """Index of the chunk's last row the slice needs, when the slice ends in it."""
        stop = self.stop
        if stop is None or part.seconds is None or part.good_time is None:
            return None
        if self.zero is None:
            kept = np.flatnonzero(part.keep)
            if not kept.size:
                return None
            self.zero = float(part.seconds[kept[0]])
        clock = part.seconds - self.zero
        usable = part.keep & part.good_time
        in_slice = usable & (clock >= stop.start_s)
        ends: list[int] = []
        if stop.end_s is not None:
            beyond = np.flatnonzero(usable & (clock >= stop.end_s))
            if beyond.size:
                ends.append(int(beyond[0]))
            in_slice &= clock < stop.end_s
        if stop.max_rows is not None:
            positions = np.flatnonzero(in_slice)
            needed = max(1, stop.max_rows - self.in_slice)
            if positions.size >= needed:
                ends.append(int(positions[needed - 1]))
        end = min(ends) if ends else None
        self.in_slice += int(in_slice[: None if end is None else end + 1].sum())
        return end

    def read(self, chunks: Iterable[RawChunk]) -> bool:
        """Read chunks until the slice is complete or the file ends; False if unusable."""
        for raw in chunks:
            pending = _Pending()
            if self.columns is None:
                if not self.first(raw):
                    return False
            else:
                raw = self.conform(raw, pending)
            done = self.add(self.parse(raw, pending), pending)
            if done is not None:
                return done
        return True

    def read_fast(self, fast: FastFile) -> bool:
        """Read the chunks of a file read without pandas (see :meth:`read`).

        Raises:
            NotFast: The file holds something the fast path does not read.
        """
        self.columns = list(fast.columns)
        for chunk in fast.chunks():
            good = np.ones(len(chunk.rows), dtype=bool)
            part = _Part(
                chunk.rows,
                chunk.prompt,
                chunk.output,
                (chunk.prompt > 0) & (chunk.output > 0),
                chunk.seconds,
                None if chunk.seconds is None else good,
                chunk.names,
                chunk.prefix,
            )
            done = self.add(part, _Pending())
            if done is not None:
                return done
        return True

    def add(self, part: _Part, pending: _Pending) -> bool | None:
        """Keep a parsed chunk up to the slice's end and record its problems.

        Returns:
            None to read on; True once the slice is complete; False when the
            file has more rows than may be read.
        """
        end = self.last_needed(part)
        if end is not None:
            part = part.head(end + 1)
        pending.replay(self.issues, None if end is None else int(part.rows[-1]))
        self.parts.append(part)
        self.rows_read += len(part.rows)
        if self.rows_read > MAX_TRACE_ROWS:
            self.issues.add_file_issue(
                "",
                f"more than {MAX_TRACE_ROWS:,} data rows",
                f"at most {MAX_TRACE_ROWS:,} rows read from one trace file (a source trace "
                "is read only up to the end of its slice: set workload.max_requests or "
                "duration_s, or cut the file)",
                "trace too long",
            )
            return False
        return True if end is not None else None

    def table(self) -> TraceTable | None:
        """Join the chunks read into the table (None when there were problems)."""
        if self.rows_read == 0:
            self.issues.add_file_issue(
                "", "(no data rows)", "at least one request row", "empty trace"
            )
            return None
        if self.issues:
            return None
        parts = self.parts
        keep = np.concatenate([p.keep for p in parts])
        if not keep.any():
            self.issues.add_file_issue(
                "",
                f"{self.rows_read} rows",
                "at least one row with both lengths >= 1",
                "every row is skipped",
            )
            return None
        arrival: FloatArray | None = None
        if self.has_time:
            arrival = np.concatenate([p.seconds for p in parts if p.seconds is not None])
            arrival = arrival - arrival[np.flatnonzero(keep)[0]]
        named = {
            name: np.concatenate([p.names.get(name, text_array("", len(p.rows))) for p in parts])
            for name in GENERIC_NAME_COLUMNS
            if self.layout.generic and self.columns is not None and name in self.columns
        }
        return TraceTable(
            path=self.path,
            format=self.layout.name,
            prompt_tokens=np.concatenate([p.prompt for p in parts])[keep],
            output_tokens=np.concatenate([p.output for p in parts])[keep],
            arrival_s=None if arrival is None else arrival[keep],
            slo_class=named["slo_class"][keep] if "slo_class" in named else None,
            origin=named["origin"][keep] if "origin" in named else None,
            category=named["category"][keep] if "category" in named else None,
            source_rows=np.concatenate([p.rows for p in parts])[keep],
            dropped_rows=int((~keep).sum()),
            hash_ids=self._prefixes(keep),
        )

    def _prefixes(self, keep: BoolArray) -> tuple[tuple[int, ...], ...] | None:
        """The kept rows' block ids (None: the file has no ``hash_ids``).

        Rows of JSONL chunks read before the key first appeared have none.
        """
        if not self.has_prefix:
            return None

        def ids(part: _Part) -> ObjArray:
            if part.prefix is not None:
                return part.prefix
            none = np.empty(len(part.rows), dtype=object)
            none.fill(())
            return none

        joined = np.concatenate([ids(part) for part in self.parts])
        return tuple(joined[keep].tolist())


def _read_fast(path: Path, layout: Layout, stop: TraceStop | None) -> TraceTable | None:
    """The table of a well-formed trace read without pandas (:mod:`.trace_fast`).

    None when the file holds anything the fast path does not read, or any
    problem: then the general reader reads it and reports every problem.
    """
    issues = RowIssues(path)
    reader = _Reader(path, layout, issues, stop)
    kind = FastCsv if layout.container == "csv" else FastJsonl
    try:
        with kind(path, layout) as fast:
            if not reader.read_fast(fast):
                return None
    except NotFast:
        return None
    table = reader.table()
    return None if issues else table


def load_trace(
    path: Path, fmt: str = "auto", stop: TraceStop | None = None
) -> tuple[TraceTable | None, list[Issue]]:
    """Read a trace file, returning the table or every problem found.

    The file is read in chunks of rows. With ``stop``, reading ends with the
    chunk holding the slice's last row (rows after it are not checked);
    otherwise to the end of the file. Either way at most
    :data:`~simulator.limits.MAX_TRACE_ROWS` rows are read.

    Args:
        path: The trace file.
        fmt: One of :data:`~simulator.workload.trace_formats.FORMAT_CHOICES`;
            ``auto`` detects the format from the extension and first line.
        stop: The slice a source trace is read for (None: the whole file).

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
    table: TraceTable | None = None
    try:
        check_first_line(path)
        layout = layout_for(path, detect_format(path) if fmt == "auto" else fmt)
        fast = _read_fast(path, layout, stop)
        if fast is not None:
            return fast, []
        chunks = csv_chunks(path) if layout.container == "csv" else jsonl_chunks(path)
        reader = _Reader(path, layout, issues, stop)
        try:
            if reader.read(chunks):
                table = reader.table()
        finally:
            chunks.close()
    except TraceFileError as exc:
        issues.add_file_issue(exc.key, exc.value, exc.allowed, exc.problem)
    except (OSError, UnicodeDecodeError) as exc:
        issues.add_file_issue("", str(exc), "a readable UTF-8 text file", "cannot read the trace")
    if table is None:
        found = issues.issues()
        return None, found or [
            make_issue(path, "", str(path), "a trace file", "cannot read the trace")
        ]
    return table, []


def read_trace(path: Path, fmt: str = "auto", stop: TraceStop | None = None) -> TraceTable:
    """Read a trace file (see :func:`load_trace`).

    Raises:
        InputError: With every problem found in the file.
    """
    table, issues = load_trace(path, fmt, stop)
    if table is None:
        raise InputError(issues)
    return table
