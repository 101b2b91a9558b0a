"""Reading a LUT file into a table of text cells.

Every cell is kept as stripped text so that the checks in
:mod:`simulator.lut.check` can report a bad cell exactly as the user wrote it.
The rows are indexed by the line the user sees: for a CSV file the physical
line number (the header is line 1), for Parquet and in-memory tables the row
position plus 2, as if the same table had been saved as CSV. Blank lines are
dropped but keep their numbers counted.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from simulator.built_files import content_digest
from simulator.errors import InputError, make_issue
from simulator.input_files import file_problem

if TYPE_CHECKING:
    import pandas as pd

CSV_SUFFIXES: tuple[str, ...] = (".csv",)
"""File name endings read as CSV."""

PARQUET_SUFFIXES: tuple[str, ...] = (".parquet",)
"""File name endings read as Parquet (needs pyarrow)."""

TextColumn = npt.NDArray[np.object_]
"""One column of text cells."""


@dataclass(frozen=True)
class RawLut:
    """A LUT file's content as text cells, before any check.

    Attributes:
        file: The file name used in messages.
        header: Column names as written (stripped), duplicates included.
        cells: One column per distinct non-empty header name (first
            occurrence), every cell stripped text (``""`` when empty).
        lines: The line number the user sees of each row.
        digest: SHA-256 of the file's bytes (empty for in-memory tables).
    """

    file: str
    header: tuple[str, ...]
    cells: Mapping[str, TextColumn]
    lines: npt.NDArray[np.int64]
    digest: str

    @property
    def rows(self) -> int:
        """Number of data rows."""
        return len(self.lines)


def _issue_error(path: Path, where: str, value: object, allowed: str, problem: str) -> InputError:
    return InputError([make_issue(path, where, value, allowed, problem)])


def read_lut_bytes(path: Path) -> bytes:
    """Return the bytes of a LUT file after checking its name and existence.

    Raises:
        InputError: The file type is unknown, or the file is missing or unreadable.
    """
    suffix = path.suffix.lower()
    if suffix not in CSV_SUFFIXES + PARQUET_SUFFIXES:
        raise _issue_error(
            path,
            "",
            path.name,
            "a LUT file ending in " + " or ".join(CSV_SUFFIXES + PARQUET_SUFFIXES),
            "unknown LUT file type",
        )
    problem = file_problem(path)
    if problem is not None:
        raise _issue_error(path, "", str(path), "an existing LUT file", problem)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _issue_error(path, "", str(path), "a readable LUT file", str(exc)) from None


def parse_lut_bytes(path: Path, data: bytes) -> RawLut:
    """Parse the bytes of a CSV or Parquet LUT file (chosen by ``path``'s ending) into text cells.

    Raises:
        InputError: The content is empty, unreadable or has no data rows.
    """
    digest = content_digest(data)
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return _read_parquet(path, data, digest)
    return _read_csv(path, data, digest)


def read_lut_file(path: Path) -> RawLut:
    """Read a CSV or Parquet LUT file into text cells.

    Raises:
        InputError: The file is missing, empty, unreadable or has no data rows.
    """
    return parse_lut_bytes(path, read_lut_bytes(path))


def _empty_error(path: Path | str) -> InputError:
    return InputError(
        [
            make_issue(
                path,
                "",
                "(empty)",
                "a header line naming the columns and at least one data row",
                "empty LUT file",
            )
        ]
    )


def _csv_error(path: Path, line: int, message: str) -> InputError:
    return _issue_error(
        path,
        f"line {line}",
        message,
        "comma-separated values with as many fields on each line as the header has",
        "not a readable CSV table",
    )


def _csv_records(path: Path, text: str) -> list[list[str]]:
    """Split CSV text into records of cells as written, each as wide as the first.

    A record with fewer fields is padded with empty cells (a blank line is a
    record of empty cells); one with more fields than the first is refused,
    naming its record number (its line, unless a quoted cell spans lines).

    Raises:
        InputError: A record is wider than the first, or the text is not CSV.
    """
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        records = list(reader)
    except csv.Error as exc:
        raise _csv_error(path, reader.line_num, str(exc)) from None
    width = max(1, len(records[0])) if records else 1
    for number, record in enumerate(records, start=1):
        if len(record) > width:
            raise _csv_error(
                path, number, f"Expected {width} fields in line {number}, saw {len(record)}"
            )
        if len(record) < width:
            record.extend([""] * (width - len(record)))
    return records


def _read_csv(path: Path, data: bytes, digest: str) -> RawLut:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _issue_error(
            path, f"byte {exc.start}", data[exc.start : exc.start + 8], "UTF-8 text", "not UTF-8"
        ) from None
    if not text.strip():
        raise _empty_error(path)
    records = _csv_records(path, text)
    # Line numbers of the records that hold text (blank ones are dropped).
    lines = [line for line, cells in enumerate(records, start=1) if "".join(cells).strip()]
    if not lines:
        raise _empty_error(path)
    header = tuple(cell.strip() for cell in records[lines[0] - 1])
    rows = [records[line - 1] for line in lines[1:]]
    return _raw(str(path), header, rows, lines[1:], digest)


_ASCII_SPACE = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"
"""The ASCII characters ``str.strip`` removes."""


def _stripped(values: list[str]) -> list[str]:
    """The cells stripped of whitespace (a column without any is returned as it is)."""
    joined = "".join(values)
    if joined.isascii() and not any(space in joined for space in _ASCII_SPACE):
        return values
    return [value.strip() for value in values]


def _raw(
    file: str,
    header: tuple[str, ...],
    rows: Sequence[Sequence[str]],
    lines: Sequence[int],
    digest: str,
) -> RawLut:
    """Keep the first column of every distinct non-empty name, cells stripped; report no rows."""
    if not rows:
        raise InputError(
            [
                make_issue(
                    file,
                    "",
                    "header only",
                    "at least one data row below the header",
                    "LUT file has no data rows",
                )
            ]
        )
    positions: dict[str, int] = {}
    for position, name in enumerate(header):
        if name and name not in positions:
            positions[name] = position
    cells: dict[str, TextColumn] = {}
    for name, position in positions.items():
        column = np.empty(len(rows), dtype=object)
        column[:] = _stripped([row[position] for row in rows])
        cells[name] = column
    return RawLut(file, header, cells, np.asarray(lines, dtype=np.int64), digest)


def _cell_text(value: object, nulls: tuple[object, ...]) -> str:
    """A value as stripped text; ``""`` for a missing one (``nulls`` or a float NaN)."""
    if any(value is null for null in nulls) or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def frame_to_raw(frame: pd.DataFrame, file: str, digest: str = "") -> RawLut:
    """Turn a table of any column types (e.g. from Parquet) into text cells.

    Missing values (None, NaN, NA) become empty cells; other values are
    rendered with ``str``. Rows are numbered from 2, as in a CSV file.

    Raises:
        InputError: The table has no columns or no rows.
    """
    if frame.shape[1] == 0:
        raise _empty_error(file)
    import pandas as pd

    nulls: tuple[object, ...] = (None, pd.NA, pd.NaT)
    header = tuple(str(name).strip() for name in frame.columns)
    rows = [
        [_cell_text(value, nulls) for value in values]
        for values in frame.itertuples(index=False, name=None)
    ]
    return _raw(file, header, rows, range(2, frame.shape[0] + 2), digest)


def _read_parquet(path: Path, data: bytes, digest: str) -> RawLut:
    if find_spec("pyarrow") is None:
        raise _issue_error(
            path,
            "",
            path.name,
            "a .csv LUT, or install Parquet support with `pip install pyarrow` "
            "(or the package's `parquet` extra)",
            "reading Parquet LUT files needs pyarrow, which is not installed",
        )
    if not data:
        raise _empty_error(path)
    import pandas as pd

    try:
        frame = pd.read_parquet(io.BytesIO(data), engine="pyarrow")
    except Exception as exc:  # pyarrow raises many types for a damaged file
        raise _issue_error(
            path, "", str(exc)[:200], "a valid Parquet file", "not a readable Parquet file"
        ) from None
    return frame_to_raw(frame, str(path), digest)
