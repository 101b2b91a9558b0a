"""Reading a trace file in chunks of rows, so that a reader can stop early.

A trace that the fast path (:mod:`.trace_fast`) does not read is read here
(pandas is imported only then): a CSV trace by pandas in chunks of
:data:`CHUNK_ROWS` rows, a JSONL trace line by line; both check the length of each line as it is read (at most
:data:`MAX_TRACE_LINE_BYTES`), so a huge cell costs neither time nor memory and
a reader that stops after the rows it needs never reads the rest of the file.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from simulator.workload.arrays import IntArray
from simulator.workload.trace_formats import json_record

if TYPE_CHECKING:
    import pandas as pd

MAX_TRACE_LINE_BYTES = 2**20
"""Longest line (header, CSV row or JSONL record) a trace file may have (1 MiB)."""

CHUNK_ROWS = 65_536
"""Rows parsed at a time: large enough for vectorised parsing, small enough
(a few MB) that stopping after a chunk reads little more than needed."""

_QUOTED_BYTES = 60

RowProblem = tuple[int, str, object, str, str]
"""``(row, column, value, allowed, problem)`` of one cell or line."""


class TraceFileError(Exception):
    """A problem with the trace file as a whole; reading stops.

    Attributes:
        key: Key path (``""`` for the file, ``line N`` for one line).
        value: The bad value as quoted.
        allowed: What is allowed.
        problem: What is wrong.
    """

    def __init__(self, key: str, value: object, allowed: str, problem: str) -> None:
        super().__init__(problem)
        self.key = key
        self.value = value
        self.allowed = allowed
        self.problem = problem


@dataclass
class RawChunk:
    """The cells of some consecutive rows of a trace file, before any checks.

    Attributes:
        columns: Column name -> cells (text for CSV, JSON values for JSONL;
            None for a JSONL record without that key).
        rows: The row number of each record (data rows count from 1).
        line_problems: Lines of a JSONL chunk that are not JSON objects.
    """

    columns: dict[str, pd.Series]
    rows: IntArray
    line_problems: list[RowProblem] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)


def _first_bytes(data: bytes) -> str:
    return data[:_QUOTED_BYTES].decode("utf-8", errors="replace")


def line_too_long(number: int, start: bytes, length: int, stream: BinaryIO) -> TraceFileError:
    """The error for line ``number`` that starts with ``start`` and is ``length`` bytes so far.

    Reads the rest of the line (in bounded pieces) to give its full length.
    """
    last = start[-1:]
    while last != b"\n":
        piece = stream.readline(MAX_TRACE_LINE_BYTES)
        if not piece:
            break
        length += len(piece)
        last = piece[-1:]
    return TraceFileError(
        f"line {number}",
        _first_bytes(start) + "...",
        f"lines of at most {MAX_TRACE_LINE_BYTES} bytes",
        f"line of {length} bytes is too long",
    )


def check_first_line(path: Path) -> None:
    """Check the lines up to the first non-blank one (the one format detection reads).

    Raises:
        TraceFileError: One of them is longer than :data:`MAX_TRACE_LINE_BYTES`.
        OSError: The file cannot be read.
    """
    with path.open("rb") as stream:
        for number, line in enumerate(
            iter(lambda: stream.readline(MAX_TRACE_LINE_BYTES + 1), b""), 1
        ):
            if len(line) > MAX_TRACE_LINE_BYTES:
                raise line_too_long(number, line, len(line), stream)
            if line.strip():
                return


class _LineGuard(io.RawIOBase):
    """A binary file passed through unchanged, raising on a line longer than the limit."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self._stream = stream
        self._number = 1
        self._length = 0
        self._start = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._stream.read(len(buffer))
        self._check(data)
        buffer[: len(data)] = data
        return len(data)

    def _check(self, data: bytes) -> None:
        if len(data) > MAX_TRACE_LINE_BYTES:
            self._check_lines(data)
            return
        first = data.find(b"\n")
        if first < 0:
            self._extend(data)
            return
        # The block is at most a line's limit long, so only the lines it
        # continues and starts can be too long, not those wholly inside it.
        self._extend(data[: first + 1])
        self._number += data.count(b"\n")
        self._length = 0
        self._start = b""
        self._extend(data[data.rfind(b"\n") + 1 :])

    def _check_lines(self, data: bytes) -> None:
        """Check a block longer than a line may be, line by line."""
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            stop = len(data) if end < 0 else end + 1
            self._extend(data[start:stop])
            if end < 0:
                return
            self._number += 1
            self._length = 0
            self._start = b""
            start = stop

    def _extend(self, piece: bytes) -> None:
        """Add ``piece`` to the current line; raise once the line is too long."""
        if len(self._start) < _QUOTED_BYTES:
            self._start += piece[: _QUOTED_BYTES - len(self._start)]
        self._length += len(piece)
        if self._length > MAX_TRACE_LINE_BYTES:
            raise line_too_long(self._number, self._start + piece[-1:], self._length, self._stream)


def csv_chunks(path: Path) -> Generator[RawChunk, None, None]:
    """Yield the rows of a CSV trace, :data:`CHUNK_ROWS` at a time (a header-only file: one empty chunk).

    Raises:
        TraceFileError: The file is empty, not CSV, not UTF-8 or has an overlong line.
    """
    import pandas as pd

    try:
        with path.open("rb") as stream:
            guarded = io.BufferedReader(_LineGuard(stream))
            reader = pd.read_csv(
                guarded,
                dtype=str,
                keep_default_na=False,
                na_filter=False,
                encoding="utf-8-sig",
                skipinitialspace=True,
                chunksize=CHUNK_ROWS,
            )
            with reader:
                first = 1
                for frame in reader:
                    columns = {
                        str(name).strip(): frame[name].astype(object) for name in frame.columns
                    }
                    rows = np.arange(first, first + len(frame), dtype=np.int64)
                    first += len(frame)
                    yield RawChunk(columns, rows)
    except pd.errors.EmptyDataError as exc:
        raise TraceFileError(
            "", "(empty file)", "a header line and data rows", "empty trace"
        ) from exc
    except (pd.errors.ParserError, csv.Error) as exc:
        message = str(exc).strip().splitlines()[-1]
        raise TraceFileError("", message, "well-formed CSV", "cannot parse the trace") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFileError(
            "", str(exc), "a readable UTF-8 CSV file", "cannot read the trace"
        ) from exc


def _jsonl_chunk(
    records: list[dict[str, object]], rows: list[int], problems: list[RowProblem]
) -> RawChunk:
    import pandas as pd

    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(str(k) for k in record))
    columns = {
        name: pd.Series([record.get(name) for record in records], dtype=object) for name in names
    }
    return RawChunk(columns, np.asarray(rows, dtype=np.int64), problems)


def jsonl_chunks(path: Path) -> Generator[RawChunk, None, None]:
    """Yield the records of a JSONL trace, :data:`CHUNK_ROWS` non-blank lines at a time.

    Row N is line N of the file; blank lines are skipped. A line that is not
    a JSON object is listed in the chunk's ``line_problems``.

    Raises:
        TraceFileError: The file is not UTF-8 or has an overlong line.
    """
    records: list[dict[str, object]] = []
    rows: list[int] = []
    problems: list[RowProblem] = []
    allowed = "one JSON object per line"
    yielded = False
    try:
        with path.open("rb") as stream:
            number = 0
            while True:
                data = stream.readline(MAX_TRACE_LINE_BYTES + 1)
                if not data:
                    break
                number += 1
                if len(data) > MAX_TRACE_LINE_BYTES:
                    raise line_too_long(number, data, len(data), stream)
                line = data.decode("utf-8-sig" if number == 1 else "utf-8")
                if not line.strip():
                    continue
                try:
                    record = json_record(line)
                except json.JSONDecodeError as exc:
                    problems.append((number, "(line)", line.strip(), allowed, exc.msg))
                else:
                    if isinstance(record, dict):
                        records.append(record)
                        rows.append(number)
                    else:
                        problems.append((number, "(line)", record, allowed, "not an object"))
                if len(records) + len(problems) >= CHUNK_ROWS:
                    yield _jsonl_chunk(records, rows, problems)
                    records, rows, problems = [], [], []
                    yielded = True
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFileError(
            "", str(exc), "a readable UTF-8 JSONL file", "cannot read the trace"
        ) from exc
    if records or problems or not yielded:
        yield _jsonl_chunk(records, rows, problems)
