"""The trace reader's fast path gives exactly what the pandas reader gives.

For generated CSV traces, well-formed and malformed, :func:`load_trace` (the
fast path, falling back to the pandas reader) must return the same table, or
the same issues, as the pandas reader alone; well-formed files must be read
by the fast path.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.workload import trace_chunks, trace_readers
from simulator.workload.trace_formats import layout_for
from simulator.workload.trace_readers import load_trace
from simulator.workload.trace_stop import TraceStop
from simulator.workload.trace_table import TraceTable

ROOT = Path(__file__).resolve().parent.parent

COLUMNS = {
    "azure": ["TIMESTAMP", "ContextTokens", "GeneratedTokens"],
    "mooncake": ["timestamp_ms", "input_length", "output_length", "hash_ids"],
    "vidur": ["num_prefill_tokens", "num_decode_tokens"],
    "csv": ["arrival_s", "prompt_tokens", "output_tokens", "slo_class", "origin", "hash_ids"],
}

BAD_CELLS = [
    "",
    " ",
    '"7"',
    "-3",
    "1.5",
    "1e3",
    "nan",
    "inf",
    "٣",
    "99999999999",
    "x",
    "2023-02-30 01:02:03",
    "2023-11-16 24:00:00",
    "2023-11-16T18:15:46.1234567891",
    "2023-11-16 18:15:46+01:00",
    "1 -2",
    "a\x00b",
]


def _table_fields(table: TraceTable) -> dict[str, object]:
    fields = {}
    for name in TraceTable.__dataclass_fields__:
        value = getattr(table, name)
        if isinstance(value, np.ndarray):
            fields[name] = (value.dtype.str, value.tolist(), value.flags.writeable)
        else:
            fields[name] = value
    return fields


def _both(path: Path, stop: TraceStop | None) -> tuple[object, object]:
    """``load_trace`` as it is, and with the pandas reader only, as comparable values."""

    def result(read: tuple[TraceTable | None, list[object]]) -> object:
        table, issues = read
        return (None if table is None else _table_fields(table), issues)

    fast = result(load_trace(path, "auto", stop))
    with mock.patch.object(trace_readers, "_read_fast", lambda *args: None):
        slow = result(load_trace(path, "auto", stop))
    return fast, slow


def _stamp(second: int, digits: int, fraction: str = "123456789") -> str:
    minute, sec = divmod(second, 60)
    hour, minute = divmod(minute, 60)
    text = f"2023-11-16 {10 + hour:02d}:{minute:02d}:{sec:02d}"
    return text + ("." + fraction.ljust(9, "0")[:digits] if digits else "")


@st.composite
def _trace(draw: st.DrawFn) -> tuple[str, str, bool]:
    """A trace file's text, its format, and whether it was left well-formed."""
    fmt = draw(st.sampled_from(sorted(COLUMNS)))
    names = list(COLUMNS[fmt])
    if fmt == "mooncake" and draw(st.booleans()):
        names.remove("hash_ids")
    if fmt == "csv":
        names = names[:3] + draw(st.lists(st.sampled_from(names[3:]), unique=True))
        if draw(st.booleans()):
            names.remove("arrival_s")
    if fmt != "csv" and draw(st.booleans()):
        names.append("extra")
    names = draw(st.permutations(names))
    rows = draw(st.integers(1, 12))
    time_s = draw(st.lists(st.integers(0, 3), min_size=rows, max_size=rows))
    digits = draw(st.sampled_from([0, 3, 6, 7, 9]))
    mixed = draw(st.booleans())
    floor = 1 if fmt == "csv" else 0
    lines = []
    clock = 0
    for row in range(rows):
        clock += time_s[row]
        cells = []
        for name in names:
            if name == "TIMESTAMP":
                if mixed:  # the same fraction, written with 6, 7 or 9 digits
                    cells.append(_stamp(clock, draw(st.sampled_from([6, 7, 9])), "5"))
                else:
                    cells.append(_stamp(clock, digits))
            elif name == "timestamp_ms":
                cells.append(str(clock * 250))
            elif name == "arrival_s":
                cells.append(f"{clock * 0.37:.{digits}f}" if digits else str(clock))
            elif name == "hash_ids":
                cells.append(" ".join(map(str, draw(st.lists(st.integers(0, 50), max_size=4)))))
            elif name in ("slo_class", "origin", "extra"):
                cells.append(draw(st.sampled_from(["", "chat", "édge", "a b"])))
            else:
                cells.append(str(draw(st.integers(floor, 3000))))
        if draw(st.integers(0, 9)) == 0:
            cells = [" " + cell for cell in cells]
        lines.append(",".join(cells))
    header = ",".join(names)
    if draw(st.booleans()):
        header = header.replace(",", ", ")
    good = draw(st.integers(0, 2)) != 0
    if not good:
        mutation = draw(st.integers(0, 7))
        row = draw(st.integers(0, rows - 1))
        cells = lines[row].split(",")
        if mutation == 0:
            cells[draw(st.integers(0, len(cells) - 1))] = draw(st.sampled_from(BAD_CELLS))
        elif mutation == 1:
            cells.pop()
        elif mutation == 2:
            cells.append("7")
        elif mutation == 3:
            lines.insert(row, draw(st.sampled_from(["", "   "])))
        elif mutation == 4:
            header = header + "," + draw(st.sampled_from(["", "bogus", names[0]]))
        elif mutation == 5:
            lines.reverse()
        elif mutation == 6:
            header = ""
        else:
            lines = []
        if mutation in (0, 1, 2):
            lines[row] = ",".join(cells)
    bom = "\ufeff" if draw(st.booleans()) else ""
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    text = bom + ending.join([header, *lines]) + (ending if draw(st.booleans()) else "")
    return text, fmt, good


@st.composite
def _stop(draw: st.DrawFn) -> TraceStop | None:
    if draw(st.booleans()):
        return None
    return TraceStop(
        start_s=float(draw(st.integers(0, 5))),
        end_s=draw(st.none() | st.floats(0.5, 20.0)),
        max_rows=draw(st.none() | st.integers(1, 6)),
    )


JSONL_KEYS = {
    "jsonl": ["arrival_s", "prompt_tokens", "output_tokens", "slo_class", "origin", "hash_ids"],
    "mooncake": ["timestamp", "input_length", "output_length", "hash_ids"],
}

BAD_VALUES: list[object] = [
    None,
    True,
    512.0,
    "7",
    -3,
    1.5,
    float("nan"),
    10**400,
    [1, -2],
    [True],
    "0 1",
    {"a": 1},
    [],
]


@st.composite
def _jsonl_trace(draw: st.DrawFn) -> tuple[str, str, bool]:
    """A JSONL trace file's text, its format + ``.jsonl``, and whether it was left well-formed."""
    fmt = draw(st.sampled_from(sorted(JSONL_KEYS)))
    keys = list(JSONL_KEYS[fmt])
    if fmt == "jsonl":
        keys = keys[:3] + draw(st.lists(st.sampled_from(keys[3:]), unique=True))
        if draw(st.booleans()):
            keys.remove("arrival_s")
    elif draw(st.booleans()):
        keys.append("extra")
    keys = draw(st.permutations(keys))
    rows = draw(st.integers(1, 12))
    floor = 1 if fmt == "jsonl" else 0
    records: list[dict[str, object]] = []
    clock = 0.0
    for _ in range(rows):
        clock += draw(st.sampled_from([0.0, 0.25, 1.0, 3.7]))
        record: dict[str, object] = {}
        for key in keys:
            if key in ("arrival_s", "timestamp"):
                record[key] = (
                    draw(st.sampled_from([clock, int(clock)])) if clock.is_integer() else clock
                )
            elif key == "hash_ids":
                record[key] = draw(st.none() | st.lists(st.integers(0, 50), max_size=4))
            elif key in ("slo_class", "origin", "extra"):
                record[key] = draw(st.sampled_from([None, "", " chat ", "édge"]))
            else:
                record[key] = draw(st.integers(floor, 3000))
        records.append(record)
    lines = [json.dumps(record) for record in records]
    good = draw(st.integers(0, 2)) != 0
    if not good:
        mutation = draw(st.integers(0, 5))
        row = draw(st.integers(0, rows - 1))
        if mutation == 0:
            records[row][draw(st.sampled_from(keys))] = draw(st.sampled_from(BAD_VALUES))
        elif mutation == 1:
            del records[row][draw(st.sampled_from(keys))]
        elif mutation == 2:
            records[row][draw(st.sampled_from(["bogus", "category", "arrival_s"]))] = 1
        elif mutation == 3:
            records.reverse()
        lines = [json.dumps(record) for record in records]
        if mutation == 4:
            lines.insert(row, draw(st.sampled_from(["", "  ", "[1]", "{bad", '"x"'])))
        elif mutation == 5:
            lines = []
    bom = "\ufeff" if draw(st.booleans()) else ""
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    text = bom + ending.join(lines) + (ending if draw(st.booleans()) else "")
    return text, f"{fmt}.jsonl", good


def _check(trace: tuple[str, str, bool], stop: TraceStop | None, chunk_rows: int) -> None:
    text, fmt, expect_fast = trace
    with (
        tempfile.TemporaryDirectory() as folder,
        mock.patch.object(trace_chunks, "CHUNK_ROWS", chunk_rows),
    ):
        fmt, _, suffix = fmt.partition(".")
        path = Path(folder) / f"trace.{suffix or 'csv'}"
        path.write_bytes(text.encode("utf-8"))
        fast, slow = _both(path, stop)
        assert fast == slow
        if expect_fast and slow[0] is not None:  # type: ignore[index]
            layout = layout_for(path, fmt)
            assert trace_readers._read_fast(path, layout, stop) is not None


SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


@settings(max_examples=40, **SETTINGS)  # type: ignore[arg-type]
@given(trace=_trace() | _jsonl_trace(), stop=_stop(), chunk_rows=st.sampled_from([2, 5, 65_536]))
def test_fast_path_gives_what_the_pandas_reader_gives(
    trace: tuple[str, str, bool], stop: TraceStop | None, chunk_rows: int
) -> None:
    _check(trace, stop, chunk_rows)


@pytest.mark.slow
@settings(max_examples=1000, **SETTINGS)  # type: ignore[arg-type]
@given(
    trace=_trace() | _jsonl_trace(),
    stop=_stop(),
    chunk_rows=st.sampled_from([1, 2, 3, 5, 65_536]),
)
def test_fast_path_gives_what_the_pandas_reader_gives_many(
    trace: tuple[str, str, bool], stop: TraceStop | None, chunk_rows: int
) -> None:
    _check(trace, stop, chunk_rows)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "scenarios/traces").glob("*.csv")))
def test_shipped_traces_are_read_fast_and_alike(name: str) -> None:
    path = ROOT / "scenarios" / "traces" / name
    for stop in (None, TraceStop(0.0, 100.0), TraceStop(10.0, None, 50)):
        fast, slow = _both(path, stop)
        assert fast == slow
        fmt = trace_readers.detect_format(path)
        assert trace_readers._read_fast(path, layout_for(path, fmt), stop) is not None


def test_a_long_line_is_left_to_the_pandas_reader(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    long = "x" * trace_chunks.MAX_TRACE_LINE_BYTES
    path.write_text(f"prompt_tokens,output_tokens,origin\n1,2,a\n3,4,{long}\n5,6,b\n")
    fast, slow = _both(path, None)
    assert fast == slow
    assert fast[1]  # type: ignore[index]


def test_block_ids_first_given_after_the_first_jsonl_chunk(tmp_path: Path) -> None:
    """Rows of the chunks before ``hash_ids`` first appears have no block ids."""
    path = tmp_path / "late.jsonl"
    path.write_text(
        '{"prompt_tokens": 1, "output_tokens": 2}\n'
        '{"prompt_tokens": 3, "output_tokens": 4, "hash_ids": [0, 1]}\n'
    )
    with mock.patch.object(trace_chunks, "CHUNK_ROWS", 1):
        table, issues = load_trace(path)
    assert issues == []
    assert table is not None and table.hash_ids == ((), (0, 1))


def test_a_json_integer_beyond_float_range_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    path.write_text(f'{{"arrival_s": {10**400}, "prompt_tokens": {10**400}, "output_tokens": 1}}\n')
    table, issues = load_trace(path)
    assert table is None
    assert [(issue.key_path, issue.problem) for issue in issues] == [
        ("row 1, column prompt_tokens", "not a finite number"),
        ("row 1, column arrival_s", "not a valid time"),
    ]


@pytest.mark.parametrize("chunk_rows", [1, 2, 65_536])
def test_date_times_of_micro_and_nanosecond_resolution_in_one_file(
    tmp_path: Path, chunk_rows: int
) -> None:
    """pandas parses a chunk to nanoseconds only when a cell has more than 6 fractional digits."""
    path = tmp_path / "mixed.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.1234567,1,1\n"
        "2023-11-16 18:15:47.123456,1,1\n"
        "2023-11-16 18:15:48,1,1\n"
        "2023-11-16 18:15:48.999999999,1,1\n"
    )
    with mock.patch.object(trace_chunks, "CHUNK_ROWS", chunk_rows):
        fast, slow = _both(path, None)
        assert trace_readers._read_fast(path, layout_for(path, "azure"), None) is not None
    assert fast == slow
