"""Results tables are written with the bytes pandas' ``to_csv`` gives them."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator.csv_table as csv_table
from simulator.csv_table import FLOAT_FORMAT, write_csv


def _pandas(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def _ours(frame: pd.DataFrame) -> str:
    handle = io.StringIO()
    write_csv(frame, handle)
    return handle.getvalue()


FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-12, 2.0**70, 123456789.123, math.nan]),
)
TEXT = st.one_of(st.none(), st.text(max_size=6), st.sampled_from(['a"b', "c,d", "e\nf", ""]))


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(FLOATS, st.integers(-(2**40), 2**40), TEXT, st.booleans(), FLOATS),
        max_size=12,
    ),
    chunk=st.integers(1, 5),
)
def test_write_csv_gives_the_bytes_of_to_csv(rows, chunk):
    frame = pd.DataFrame(rows, columns=["ms", "count", "reason", "ok", "mb"]).astype(
        {"ms": float, "count": "int64", "ok": bool, "mb": float}
    )
    original = csv_table.CHUNK_ROWS
    csv_table.CHUNK_ROWS = chunk  # several chunks, and rows left over
    try:
        assert _ours(frame) == _pandas(frame)
    finally:
        csv_table.CHUNK_ROWS = original


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame({"a": [], "b": []}),
        pd.DataFrame(),
        pd.DataFrame({"n": pd.array([1, None, 3], dtype="Int64")}),  # written by pandas
        pd.DataFrame({"mixed": [0.1, "x", None, np.float64(2.5), True, math.nan, pd.NA]}),
        pd.DataFrame({"flag": [True, None, False]}),
        pd.DataFrame({"small": np.array([1.5, np.nan], dtype=np.float32)}),
    ],
)
def test_edge_tables_match_to_csv(frame):
    assert _ours(frame) == _pandas(frame)
