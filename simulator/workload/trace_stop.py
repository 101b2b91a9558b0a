"""Where a trace reader may stop reading (a light module: no pandas)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TraceStop:
    """Where reading a timed trace may stop: once every row of a slice has been read.

    The slice is the rows with ``start_s <= t < end_s`` (t in seconds after
    the first kept row's arrival, as :meth:`TraceTable.window` slices), the
    first ``max_rows`` of them. Arrivals are non-decreasing, so the reader
    stops after the ``max_rows``-th row of the slice or at the first row at
    or after ``end_s``; later rows are not checked, and only the rest of
    their chunk is read.

    Attributes:
        start_s: Slice start.
        end_s: Slice end (None: to the end of the file).
        max_rows: Most rows of the slice needed (None: all).
    """

    start_s: float = 0.0
    end_s: float | None = None
    max_rows: int | None = None
