r"""Reading well-formed CSV traces without pandas: the fast path of the trace reader.

Importing pandas takes longer than reading a 10,000-row trace (about 0.15 s
of ``python -X importtime`` against about 0.03 s).
:class:`FastCsv` reads the CSV formats (``azure``, ``mooncake`` CSV, ``vidur``,
``csv``) with plain string operations and numpy, in the same chunks of
:data:`~simulator.workload.trace_chunks.CHUNK_ROWS` rows as the pandas reader,
giving for every chunk exactly the values the pandas reader parses. It reads
only files without anything unusual:

* UTF-8 text (a leading byte-order mark is allowed), lines ending in ``\n``
  or ``\r\n``, each shorter than
  :data:`~simulator.workload.trace_chunks.MAX_TRACE_LINE_BYTES` (a longer
  line is not read whole);
* a header naming each column once (no empty names) with the format's
  required columns (and, for ``csv``, no unknown ones), and at least one data row;
* no quote characters, no NUL and no blank line; every row with as many
  fields as the header;
* token counts written as plain digits, within the bounds that make a row
  valid (for ``csv``: >= 1);
* arrival times written as ``YYYY-MM-DD HH:MM:SS[.fraction]`` (``azure``; up
  to 9 fractional digits, years 1900 to 2199, at most 2**53 ns, about 104
  days, after the first row) or as plain decimals
  (``123``, ``12.5``; up to 12 digits before the point and 15 after),
  non-decreasing;
* block ids (``hash_ids``) that are space-separated whole numbers >= 0.

On anything else it raises :class:`NotFast` and the pandas reader reads the
file from the start, so every problem is reported exactly as before. JSONL
traces: :mod:`simulator.workload.trace_fast_jsonl`.
Surrounding spaces in cells are ignored, as the pandas reader ignores them.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from simulator.workload import trace_chunks
from simulator.workload.arrays import FloatArray, IntArray, StrArray, text_array
from simulator.workload.trace_chunks import MAX_TRACE_LINE_BYTES
from simulator.workload.trace_formats import GENERIC_NAME_COLUMNS, PREFIX_COLUMN, Layout
from simulator.workload.trace_table import MAX_REQUEST_TOKENS

ObjArray = npt.NDArray[np.object_]

BLOCK_BYTES = 2**20
"""Bytes read at a time (a chunk is read to at most this far past its last row)."""

_BOM = b"\xef\xbb\xbf"
_COUNT_DIGITS = len(str(MAX_REQUEST_TOKENS))
_DATE_TIME = re.compile(
    r"(?:19|20|21)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[ T]"
    r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?",
    re.ASCII,
)
_NS_PER_S = 1_000_000_000
_MAX_EXACT_TICKS = 2**53
"""Most nanoseconds after the first row read: pandas nudges times beyond it off whole seconds."""
_DECIMAL = re.compile(r"\d{1,12}(?:\.\d{1,15})?", re.ASCII)


class NotFast(Exception):
    """The file holds something the fast path does not read; the pandas reader reads it."""


@dataclass
class FastChunk:
    """The parsed cells of some consecutive data rows, all valid.

    Attributes:
        rows: Row number of each row (data rows count from 1).
        prompt: Prompt lengths.
        output: Output lengths.
        seconds: Arrival seconds on the file's clock (None: no time column).
        names: Optional text columns, stripped.
        prefix: Block ids per row (None: not read).
    """

    rows: IntArray
    prompt: IntArray
    output: IntArray
    seconds: FloatArray | None
    names: dict[str, StrArray] = field(default_factory=dict)
    prefix: ObjArray | None = None


def _lines(stream: BinaryIO) -> Iterator[list[bytes]]:
    """Yield the file's lines (without their newline) a block at a time.

    Raises:
        NotFast: A line (with its newline) is longer than the limit.
    """
    rest = b""
    while True:
        block = stream.read(BLOCK_BYTES)
        if not block:
            break
        lines = (rest + block).split(b"\n")
        rest = lines.pop()
        if len(rest) >= MAX_TRACE_LINE_BYTES or (
            lines and max(map(len, lines)) >= MAX_TRACE_LINE_BYTES
        ):
            raise NotFast
        if lines:
            yield lines
    if rest:
        yield [rest]


def _text(lines: list[bytes]) -> list[str]:
    """Decode lines, dropping the carriage return of CRLF endings (NotFast on odd characters)."""
    try:
        text = b"\n".join(lines).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotFast from exc
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        text = text.removesuffix("\r")
    if '"' in text or "\r" in text or "\x00" in text:
        raise NotFast
    return text.split("\n")


def _plain(column: list[str], pattern: re.Pattern[str] | None = None) -> list[str]:
    """The cells stripped, when every one is plain digits (or matches ``pattern``)."""

    def fits(cells: list[str]) -> bool:
        if pattern is not None:
            return all(map(pattern.fullmatch, cells))
        joined = "".join(cells)
        return min(map(len, cells)) > 0 and joined.isascii() and joined.isdigit()

    if fits(column):
        return column
    stripped = [cell.strip() for cell in column]
    if fits(stripped):
        return stripped
    raise NotFast


def _counts(column: list[str], floor: int) -> IntArray:
    """Token counts, each within ``floor`` to :data:`MAX_REQUEST_TOKENS`."""
    cells = _plain(column)
    if max(map(len, cells)) > _COUNT_DIGITS:
        raise NotFast
    counts = np.fromiter(map(int, cells), dtype=np.int64, count=len(cells))
    if counts.min() < floor or counts.max() > MAX_REQUEST_TOKENS:
        raise NotFast
    return counts


def _block_ids(column: list[str]) -> ObjArray:
    """Each row's block ids (an empty cell: none)."""
    out = np.empty(len(column), dtype=object)
    try:
        for index, cell in enumerate(column):
            ids = tuple(int(part) for part in cell.split())
            if any(value < 0 for value in ids):
                raise NotFast
            out[index] = ids
    except ValueError as exc:
        raise NotFast from exc
    return out


def check_columns(names: list[str], layout: Layout) -> None:
    """Raise NotFast unless ``names`` are distinct and as the layout needs them."""
    required = {layout.prompt_column, layout.output_column}
    if layout.time_column is not None and not layout.generic:
        required.add(layout.time_column)
    if (
        "" in names
        or len(set(names)) < len(names)
        or not required <= set(names)
        or (layout.generic and not set(names) <= set(layout.known_columns()))
    ):
        raise NotFast


class FastFile:
    """A trace file read without pandas: its lines, in chunks of rows.

    Args:
        path: The trace file.
        layout: Its format's layout.

    Raises:
        NotFast: On opening, when the file does not start as the fast path needs.
    """

    def __init__(self, path: Path, layout: Layout) -> None:
        self.layout = layout
        try:
            self._stream: BinaryIO = path.open("rb")
        except OSError as exc:
            raise NotFast from exc
        self._pending: list[bytes] = []
        self._lines = _lines(self._stream)
        try:
            self._pending = next(self._lines)
            self._pending[0] = self._pending[0].removeprefix(_BOM)
            self.columns = self._columns()
        except (StopIteration, OSError) as exc:
            self.close()
            raise NotFast from exc
        except BaseException:
            self.close()
            raise
        self._last: float | int | None = None

    def __enter__(self) -> FastFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._stream.close()

    def _columns(self) -> list[str]:
        """The file's columns, from its first lines (``self._pending``)."""
        raise NotImplementedError

    def _parse(self, lines: list[bytes], first: int) -> FastChunk:
        """Parse one chunk of data lines; row numbers start at ``first``."""
        raise NotImplementedError

    @property
    def has_prefix(self) -> bool:
        """Whether the file's block ids are read."""
        return PREFIX_COLUMN in self.columns and self.layout.name not in ("azure", "vidur")

    def chunks(self) -> Generator[FastChunk, None, None]:
        """Yield the data rows, :data:`~simulator.workload.trace_chunks.CHUNK_ROWS` at a time.

        Raises:
            NotFast: Anything the fast path does not read (including a file
                without data rows).
        """
        size = trace_chunks.CHUNK_ROWS
        buffered = self._pending
        first = 1
        ended = False
        while not ended:
            try:
                buffered.extend(next(self._lines))
            except StopIteration:
                ended = True
            except OSError as exc:
                raise NotFast from exc
            while len(buffered) >= size or (ended and buffered):
                count = min(size, len(buffered))
                yield self._parse(buffered[:count], first)
                first += count
                del buffered[:count]
        if first == 1:
            raise NotFast

    def check_order(self, times: npt.NDArray[np.float64 | np.int64], last: float) -> None:
        """Raise NotFast unless the times go on from the previous chunk's without decreasing."""
        if (self._last is not None and times[0] < self._last) or bool(
            np.any(times[1:] < times[:-1])
        ):
            raise NotFast
        self._last = last


class FastCsv(FastFile):
    """A CSV trace read without pandas (see the module docstring)."""

    _first_tick: int | None = None

    def _columns(self) -> list[str]:
        """The header's column names (stripped), checked against the layout."""
        (line,) = _text([self._pending.pop(0)])
        names = [name.strip() for name in line.split(",")]
        check_columns(names, self.layout)
        return names

    def _parse(self, lines: list[bytes], first: int) -> FastChunk:
        """Parse one chunk of data lines; row numbers start at ``first``."""
        text = _text(lines)
        width = len(self.columns)
        if set(map(str.count, text, repeat(","))) != {width - 1}:
            raise NotFast
        cells = ",".join(text).split(",")
        column = {name: cells[index::width] for index, name in enumerate(self.columns)}
        layout = self.layout
        floor = 1 if layout.generic else 0
        time_column = layout.time_column
        seconds = None if time_column is None else self._seconds(column.get(time_column))
        names = {
            name: text_array([cell.strip() for cell in column[name]], len(text))
            for name in GENERIC_NAME_COLUMNS
            if layout.generic and name in column
        }
        return FastChunk(
            rows=np.arange(first, first + len(text), dtype=np.int64),
            prompt=_counts(column[layout.prompt_column], floor),
            output=_counts(column[layout.output_column], floor),
            seconds=seconds,
            names=names,
            prefix=_block_ids(column[PREFIX_COLUMN]) if self.has_prefix else None,
        )

    def _seconds(self, column: list[str] | None) -> FloatArray | None:
        """Arrival seconds (date-times: after the file's first row), checked non-decreasing.

        None when the file has no time column.
        """
        if column is None:
            return None
        if self.layout.time_units_per_s != 0.0:
            values = np.fromiter(map(float, _plain(column, _DECIMAL)), np.float64, len(column))
            seconds = values / self.layout.time_units_per_s
            self.check_order(seconds, float(seconds[-1]))
            return seconds
        try:
            ticks = np.array(_plain(column, _DATE_TIME), dtype="datetime64[ns]").astype(np.int64)
        except ValueError as exc:
            raise NotFast from exc
        if self._first_tick is None:
            self._first_tick = int(ticks[0])
        ticks = ticks - self._first_tick
        self.check_order(ticks, int(ticks[-1]))
        if int(ticks.max()) > _MAX_EXACT_TICKS:
            raise NotFast
        # Whole seconds plus the rest, as pandas' total_seconds computes them. Each term is
        # exact or correctly rounded, so the result does not depend on whether pandas
        # parsed the text to micro- or nanoseconds.
        whole_s, rest_ns = np.divmod(ticks, _NS_PER_S)
        out: FloatArray = whole_s + rest_ns / _NS_PER_S
        return out
