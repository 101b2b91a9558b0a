"""Reading a LUT file into a table of text cells.

Every cell is kept as stripped text so that the checks in
:mod:`simulator.lut.check` can report a bad cell exactly as the user wrote it.
The rows are indexed by the line the user sees: for a CSV file the physical
line number (the header is line 1), for Parquet and in-memory tables the row
position plus 2, as if the same table had been saved as CSV. Blank lines are
dropped but keep their numbers counted.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.errors import InputError, make_issue
from simulator.input_files import file_problem

CSV_SUFFIXES: tuple[str, ...] = (".csv",)
"""File name endings read as CSV."""

PARQUET_SUFFIXES: tuple[str, ...] = (".parquet",)
"""File name endings read as Parquet (needs pyarrow)."""

_LINE_IN_MESSAGE = re.compile(r"line (\d+)")


@dataclass(frozen=True)
class RawLut:
    """A LUT file's content as text cells, before any check.

    Attributes:
        file: The file name used in messages.
        header: Column names as written (stripped), duplicates included.
        cells: One column per distinct non-empty header name (first
            occurrence), every cell stripped text (``""`` when empty), indexed
            by the line number the user sees.
        digest: SHA-256 of the file's bytes (empty for in-memory tables).
    """

    file: str
    header: tuple[str, ...]
    cells: pd.DataFrame
    digest: str


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


def content_digest(data: bytes) -> str:
    """Return the SHA-256 hex digest of a file's bytes."""
    return hashlib.sha256(data).hexdigest()


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


def _read_csv(path: Path, data: bytes, digest: str) -> RawLut:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _issue_error(
            path, f"byte {exc.start}", data[exc.start : exc.start + 8], "UTF-8 text", "not UTF-8"
        ) from None
    if not text.strip():
        raise _empty_error(path)
    try:
        table = pd.read_csv(
            io.StringIO(text),
            header=None,
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        found = _LINE_IN_MESSAGE.search(message)
        where = f"line {found.group(1)}" if found else ""
        raise _issue_error(
            path,
            where,
            message,
            "comma-separated values with as many fields on each line as the header has",
            "not a readable CSV table",
        ) from None
    cells = np.char.strip(table.to_numpy(dtype=object).astype(str)).astype(object)
    filled = ~(cells == "").all(axis=1)
    lines = np.arange(1, cells.shape[0] + 1)[filled]  # physical line numbers
    cells = cells[filled]
    if cells.shape[0] == 0:
        raise _empty_error(path)
    header = tuple(str(v) for v in cells[0])
    body = pd.DataFrame(cells[1:], index=lines[1:], columns=list(range(cells.shape[1])))
    return _raw(str(path), header, body, digest)


def _raw(file: str, header: tuple[str, ...], body: pd.DataFrame, digest: str) -> RawLut:
    """Keep the first column of every distinct non-empty name; report a table with no rows."""
    if body.empty:
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
    cells = body.iloc[:, list(positions.values())].copy()
    cells.columns = list(positions)
    return RawLut(file=file, header=header, cells=cells, digest=digest)


def _is_null(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def frame_to_raw(frame: pd.DataFrame, file: str, digest: str = "") -> RawLut:
    """Turn a table of any column types (e.g. from Parquet) into text cells.

    Missing values (None, NaN, NA) become empty cells; other values are
    rendered with ``str``. Rows are numbered from 2, as in a CSV file.

    Raises:
        InputError: The table has no columns or no rows.
    """
    if frame.shape[1] == 0:
        raise _empty_error(file)
    header = tuple(str(name).strip() for name in frame.columns)
    body = pd.DataFrame(
        {
            position: ["" if _is_null(v) else str(v).strip() for v in frame.iloc[:, position]]
            for position in range(frame.shape[1])
        },
        index=range(2, frame.shape[0] + 2),
        dtype=object,
    )
    return _raw(file, header, body, digest)


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
    try:
        frame = pd.read_parquet(io.BytesIO(data), engine="pyarrow")
    except Exception as exc:  # pyarrow raises many types for a damaged file
        raise _issue_error(
            path, "", str(exc)[:200], "a valid Parquet file", "not a readable Parquet file"
        ) from None
    return frame_to_raw(frame, str(path), digest)
