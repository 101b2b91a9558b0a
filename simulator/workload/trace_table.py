"""The parsed content of one trace file, and slicing it by time and count."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.workload.arrays import FloatArray, IntArray, StrArray, frozen

MAX_REQUEST_TOKENS = 10_000_000
"""Longest prompt or output a trace row or a length distribution may give (tokens)."""


@dataclass(frozen=True, eq=False)
class TraceTable:
    """Requests read from a trace file, one array element per kept row.

    Attributes:
        path: The file the rows were read from.
        format: The format it was read as (``azure``, ``mooncake``, ``vidur``,
            ``csv`` or ``jsonl``).
        prompt_tokens: Prompt length of each row (tokens, >= 1).
        output_tokens: Output length of each row (tokens, >= 1).
        arrival_s: Arrival time of each row in seconds after the first row's
            (non-decreasing, starts at 0); None for a lengths-only file.
        slo_class: SLO class name per row, "" where the row names none; None
            when the file has no ``slo_class`` column.
        origin: Client device class per row, "" where the row names none;
            None when the file has no ``origin`` column.
        category: Task category per row, "" where the row names none; None
            when the file has no ``category`` column.
        source_rows: The row number in the file of each kept row (data rows
            count from 1), for messages about individual rows.
        dropped_rows: Rows the reader skipped (real formats drop rows with a
            zero prompt or output length; see ``docs/workload.md``).
        hash_ids: Each row's prompt block ids; None when the file has no
            ``hash_ids`` column.
    """

    path: Path
    format: str
    prompt_tokens: IntArray
    output_tokens: IntArray
    arrival_s: FloatArray | None = None
    slo_class: StrArray | None = None
    origin: StrArray | None = None
    category: StrArray | None = None
    source_rows: IntArray | None = None
    dropped_rows: int = 0
    hash_ids: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        size = len(self.prompt_tokens)
        if self.hash_ids is not None and len(self.hash_ids) != size:
            raise ValueError(f"TraceTable.hash_ids must have {size} elements")
        rows = self.source_rows if self.source_rows is not None else np.arange(1, size + 1)
        object.__setattr__(self, "source_rows", rows)
        for name in (
            "prompt_tokens",
            "output_tokens",
            "arrival_s",
            "slo_class",
            "origin",
            "category",
        ):
            array = getattr(self, name)
            if array is None:
                continue
            if array.ndim != 1 or len(array) != size:
                raise ValueError(f"TraceTable.{name} must be 1-D with {size} elements")
            object.__setattr__(self, name, frozen(array))
        object.__setattr__(self, "source_rows", frozen(np.asarray(rows, dtype=np.int64)))

    def __len__(self) -> int:
        return len(self.prompt_tokens)

    @property
    def has_arrivals(self) -> bool:
        """Whether the file gives arrival times (so it can be replayed)."""
        return self.arrival_s is not None

    def span_s(self) -> float:
        """Return the time from the first to the last arrival (0 without arrivals)."""
        if self.arrival_s is None or len(self) == 0:
            return 0.0
        return float(self.arrival_s[-1] - self.arrival_s[0])

    def row_of(self, index: int) -> int:
        """Return the file row number of kept row ``index``."""
        assert self.source_rows is not None  # set in __post_init__
        return int(self.source_rows[index])

    def rows_with_origin(self, name: str) -> list[int]:
        """Return the file row numbers of the rows whose origin is ``name``."""
        if self.origin is None:
            return []
        return [self.row_of(int(i)) for i in np.flatnonzero(self.origin == name)]

    def take(self, indices: IntArray) -> TraceTable:
        """Return the rows at ``indices`` (in that order) as a new table."""

        def pick(array: np.ndarray | None) -> np.ndarray | None:
            return None if array is None else array[indices]

        assert self.source_rows is not None
        return TraceTable(
            path=self.path,
            format=self.format,
            prompt_tokens=self.prompt_tokens[indices],
            output_tokens=self.output_tokens[indices],
            arrival_s=pick(self.arrival_s),
            slo_class=pick(self.slo_class),
            origin=pick(self.origin),
            category=pick(self.category),
            source_rows=self.source_rows[indices],
            dropped_rows=self.dropped_rows,
            hash_ids=None
            if self.hash_ids is None
            else tuple(self.hash_ids[int(i)] for i in indices),
        )

    def window(
        self, start_s: float = 0.0, duration_s: float | None = None, max_rows: int | None = None
    ) -> TraceTable:
        """Return the slice of rows with ``start_s <= arrival_s < start_s + duration_s``.

        Times are on the trace's own clock (seconds after its first arrival).
        At most ``max_rows`` rows are kept (the earliest). Arrival times are
        *not* shifted; see :meth:`rebased`.

        Raises:
            ValueError: The table has no arrival times.
        """
        if self.arrival_s is None:
            raise ValueError(f"{self.path} has no arrival times to slice by")
        first = np.searchsorted(self.arrival_s, start_s, side="left")
        if duration_s is None:
            last = len(self)
        else:
            last = int(np.searchsorted(self.arrival_s, start_s + duration_s, side="left"))
        if max_rows is not None:
            last = min(last, int(first) + max_rows)
        return self.take(np.arange(first, max(int(first), last), dtype=np.int64))

    def rebased(self) -> TraceTable:
        """Return the table with arrival times shifted so the first is 0."""
        if self.arrival_s is None or len(self) == 0:
            return self
        shifted = self.arrival_s - self.arrival_s[0]
        return TraceTable(
            path=self.path,
            format=self.format,
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            arrival_s=shifted,
            slo_class=self.slo_class,
            origin=self.origin,
            category=self.category,
            source_rows=self.source_rows,
            dropped_rows=self.dropped_rows,
            hash_ids=self.hash_ids,
        )
