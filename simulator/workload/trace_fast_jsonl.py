"""Reading well-formed JSONL traces without pandas (``jsonl``, ``mooncake`` JSONL).

The JSONL side of :mod:`simulator.workload.trace_fast`: it reads only files
in which every line is a JSON object with the same keys as the first (the
format's required keys; for ``jsonl`` no unknown ones), with no blank line,
token counts as JSON integers within the bounds that make a row valid,
arrival times as finite JSON numbers, non-decreasing, text names as strings
or ``null`` and block ids as lists of integers >= 0 or ``null``. On anything
else it raises :class:`~simulator.workload.trace_fast.NotFast` and the
general reader reads the file.
"""

from __future__ import annotations

import math

import numpy as np

from simulator.workload.arrays import IntArray, StrArray, text_array
from simulator.workload.trace_fast import FastChunk, FastFile, NotFast, ObjArray, check_columns
from simulator.workload.trace_formats import GENERIC_NAME_COLUMNS, PREFIX_COLUMN, json_record
from simulator.workload.trace_table import MAX_REQUEST_TOKENS


def _records(lines: list[bytes]) -> list[dict[str, object]]:
    """The lines as JSON objects."""
    records = []
    try:
        for line in lines:
            record = json_record(line.decode("utf-8"))
            if not isinstance(record, dict):
                raise NotFast
            records.append(record)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise NotFast from exc
    return records


def _counts(cells: list[object], floor: int) -> IntArray:
    """Token counts: integers from ``floor`` to :data:`MAX_REQUEST_TOKENS`."""
    if not all(type(cell) is int and floor <= cell <= MAX_REQUEST_TOKENS for cell in cells):
        raise NotFast
    return np.array(cells, dtype=np.int64)


def _names(cells: list[object]) -> StrArray:
    """Text names, stripped (``null``: "")."""
    out = []
    for cell in cells:
        if cell is None:
            out.append("")
        elif isinstance(cell, str):
            out.append(cell.strip())
        else:
            raise NotFast
    return text_array(out, len(out))


def _block_ids(cells: list[object]) -> ObjArray:
    """Each row's block ids (``null``: none)."""
    out = np.empty(len(cells), dtype=object)
    for index, cell in enumerate(cells):
        if cell is None:
            out[index] = ()
        elif isinstance(cell, list) and all(type(v) is int and v >= 0 for v in cell):
            out[index] = tuple(cell)
        else:
            raise NotFast
    return out


class FastJsonl(FastFile):
    """A JSONL trace read without pandas (see the module docstring)."""

    def _columns(self) -> list[str]:
        """The first record's keys, checked against the layout."""
        (first,) = _records(self._pending[:1])
        names = list(first)
        check_columns(names, self.layout)
        self._keys = set(names)
        return names

    def _parse(self, lines: list[bytes], first: int) -> FastChunk:
        """Parse one chunk of lines; row numbers start at ``first``."""
        records = _records(lines)
        if any(record.keys() != self._keys for record in records):
            raise NotFast
        layout = self.layout
        floor = 1 if layout.generic else 0
        column = {name: [record[name] for record in records] for name in self.columns}
        seconds = None
        if layout.time_column in column:
            times = column[layout.time_column]
            if not all(type(cell) in (int, float) for cell in times):
                raise NotFast
            try:
                values = [float(cell) for cell in times]  # type: ignore[arg-type]
            except OverflowError as exc:
                raise NotFast from exc
            if not all(map(math.isfinite, values)):
                raise NotFast
            seconds = np.array(values, dtype=np.float64) / layout.time_units_per_s
            self.check_order(seconds, float(seconds[-1]))
        return FastChunk(
            rows=np.arange(first, first + len(records), dtype=np.int64),
            prompt=_counts(column[layout.prompt_column], floor),
            output=_counts(column[layout.output_column], floor),
            seconds=seconds,
            names={
                name: _names(column[name])
                for name in GENERIC_NAME_COLUMNS
                if layout.generic and name in column
            },
            prefix=_block_ids(column[PREFIX_COLUMN]) if self.has_prefix else None,
        )
