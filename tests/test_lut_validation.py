from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

from simulator.errors import InputError, Issue
from simulator.lut import LutKey, load_lut
from tests.lut_factory import COLUMNS, grid_rows, write_lut, write_rows


def _issues(path: Path) -> tuple[Issue, ...]:
    with pytest.raises(InputError) as info:
        load_lut(path, use_cache=False)
    for issue in info.value.issues:
        assert issue.file == str(path)
    return info.value.issues


def _only(path: Path) -> Issue:
    issues = _issues(path)
    assert len(issues) == 1, [i.format() for i in issues]
    return issues[0]


def test_valid_file_loads(tmp_path: Path) -> None:
    table = load_lut(write_lut(tmp_path / "ok.csv", phases=("prefill", "draft_decode", "verify")))
    assert len(table.keys()) == 3
    assert table.row_count == 9 + 9 + 27


def test_missing_required_column(tmp_path: Path) -> None:
    columns = [c for c in COLUMNS if c != "energy_mj"]
    issue = _only(write_rows(tmp_path / "m.csv", grid_rows(), columns))
    assert issue.key_path == "header"
    assert "missing required column 'energy_mj'" in issue.problem


def test_unknown_column_with_did_you_mean(tmp_path: Path) -> None:
    columns = [c if c != "latency_ms" else "latency_msec" for c in COLUMNS]
    rows = [{**r, "latency_msec": r["latency_ms"]} for r in grid_rows()]
    issues = _issues(write_rows(tmp_path / "u.csv", rows, columns))
    unknown = [i for i in issues if "unknown column" in i.problem]
    assert len(unknown) == 1
    assert unknown[0].key_path == f"header, column {COLUMNS.index('latency_ms') + 1}"
    assert "did you mean 'latency_ms'?" in unknown[0].problem
    assert any("missing required column 'latency_ms'" in i.problem for i in issues)


def test_optional_columns_may_be_absent(tmp_path: Path) -> None:
    columns = [c for c in COLUMNS if c not in ("source", "notes")]
    table = load_lut(write_rows(tmp_path / "o.csv", grid_rows(), columns))
    assert len(table.keys()) == 1


def test_repeated_column(tmp_path: Path) -> None:
    columns = [*COLUMNS, "notes"]
    issue = _only(write_rows(tmp_path / "r.csv", grid_rows(), columns))
    assert issue.problem == "repeated column"
    assert issue.key_path == f"header, column {len(COLUMNS) + 1}"


def test_text_in_numeric_column_names_line_and_column(tmp_path: Path) -> None:
    rows = grid_rows()
    rows[4]["latency_ms"] = "fast"
    issue = _only(write_lut(tmp_path / "t.csv", rows))
    # Data row 5 is line 6 of the file (line 1 is the header).
    assert issue.key_path == "row 6, column latency_ms"
    assert issue.value == "'fast'"
    assert issue.problem == "not a number"
    assert issue.allowed == "a finite number >= 0 and <= 1e+09"


def test_nan_and_infinite_values(tmp_path: Path) -> None:
    rows = grid_rows()
    rows[0]["energy_mj"] = float("nan")
    rows[1]["peak_mem_mb"] = "inf"
    issues = _issues(write_lut(tmp_path / "n.csv", rows))
    assert [(i.key_path, i.problem) for i in issues] == [
        ("row 2, column energy_mj", "NaN is not allowed"),
        ("row 3, column peak_mem_mb", "not finite"),
    ]


def test_negative_latency_and_kv_delta(tmp_path: Path) -> None:
    rows = grid_rows()
    rows[2]["latency_ms"] = -1.5
    rows[3]["kv_delta_mb"] = -0.1
    issues = _issues(write_lut(tmp_path / "neg.csv", rows))
    assert [(i.key_path, i.value, i.problem) for i in issues] == [
        ("row 4, column latency_ms", "'-1.5'", "too small"),
        ("row 5, column kv_delta_mb", "'-0.1'", "too small"),
    ]


WHOLE = "a whole number >= 1 and <= 1,000,000,000"


def test_whole_number_columns(tmp_path: Path) -> None:
    rows = grid_rows()
    rows[0]["microbatch"] = "2.5"
    rows[1]["tensor_parallel"] = 0
    rows[2]["context_len"] = "128.0"  # a whole number written as a float is fine
    issues = _issues(write_lut(tmp_path / "w.csv", rows))
    assert [(i.key_path, i.problem, i.allowed) for i in issues] == [
        ("row 2, column microbatch", "not a whole number", WHOLE),
        ("row 3, column tensor_parallel", "too small", WHOLE),
    ]


def test_bad_phase_and_dtype(tmp_path: Path) -> None:
    rows = grid_rows()
    rows[0]["phase"] = "verfy"
    rows[5]["dtype"] = "int4"
    issues = _issues(write_lut(tmp_path / "e.csv", rows))
    assert len(issues) == 2
    phase, dtype = issues
    assert phase.key_path == "row 2, column phase"
    assert "did you mean 'verify'?" in phase.problem
    assert "'draft_decode'" in phase.allowed and "'fused_decode'" in phase.allowed
    assert dtype.key_path == "row 7, column dtype"
    assert dtype.value == "'int4'"
    assert dtype.allowed == "one of 'fp16', 'bf16', 'fp8'"


def test_empty_required_cell(tmp_path: Path) -> None:
    rows = grid_rows()
    rows[3]["model"] = ""
    issue = _only(write_lut(tmp_path / "blank.csv", rows))
    assert (issue.key_path, issue.problem) == ("row 5, column model", "missing value")


def test_many_problems_are_capped(tmp_path: Path) -> None:
    rows = grid_rows()
    for row in rows:
        row["latency_ms"] = "x"
        row["energy_mj"] = "y"
    issues = _issues(write_lut(tmp_path / "many.csv", rows))
    assert len(issues) == 21
    assert issues[0].key_path == "row 2, column latency_ms"
    assert issues[1].key_path == "row 2, column energy_mj"
    assert issues[-1].value == "'34 more'"


def test_duplicate_grid_point(tmp_path: Path) -> None:
    rows = grid_rows()
    rows.append(dict(rows[7]))
    issue = _only(write_lut(tmp_path / "d.csv", rows))
    assert issue.key_path == f"row {len(rows) + 1}"
    assert "duplicate grid point: row 9 " in issue.problem
    assert issue.value == "'context_len=128, microbatch=16, fanout_k=2'"


def test_unsorted_rows_are_fine(tmp_path: Path) -> None:
    rows = grid_rows(phases=("prefill", "verify"))
    rows.reverse()
    rows[3], rows[20] = rows[20], rows[3]
    table = load_lut(write_lut(tmp_path / "s.csv", rows))
    key = LutKey("verify", "llama-2-7b", "a100-sxm4-80gb", 1, 1, "fp16")
    assert table.lookup(key, 512, 4, 2).latency_ms == pytest.approx(
        2.0 + 5.12 + 2.0 + 0.5 + 2.048 + 0.004 + 0.04096
    )


def test_incomplete_grid_names_missing_points(tmp_path: Path) -> None:
    rows = [
        r
        for r in grid_rows()
        if not (r["context_len"] == 512 and r["microbatch"] == 4 and r["fanout_k"] in (2, 4))
    ]
    issue = _only(write_lut(tmp_path / "i.csv", rows))
    assert issue.key_path.startswith("rows with phase=verify model=llama-2-7b")
    assert issue.problem == (
        "incomplete grid: 2 of 27 points missing: context_len=512, microbatch=4, fanout_k=2; "
        "context_len=512, microbatch=4, fanout_k=4"
    )
    assert issue.value == "'25 rows'"
    assert "context_len {128, 512, 2048}" in issue.allowed


def test_fanout_must_be_one_for_prefill(tmp_path: Path) -> None:
    rows = grid_rows(phases=("prefill",), fanout_ks=(1,))
    for row in rows:
        row["fanout_k"] = 2
    issues = _issues(write_lut(tmp_path / "pf.csv", rows))
    assert len(issues) == 9
    assert issues[0].key_path == "row 2, column fanout_k"
    assert "must be 1 for a prefill row" in issues[0].problem


def test_blank_lines_keep_line_numbers(tmp_path: Path) -> None:
    path = write_lut(tmp_path / "b.csv")
    lines = path.read_text().splitlines()
    lines.insert(3, "")  # now line 4 is blank and old line 4 is line 5
    fields = lines[4].split(",")
    fields[COLUMNS.index("dtype")] = "fp32"
    lines[4] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n\n")
    issue = _only(path)
    assert issue.key_path == "row 5, column dtype"


def test_ragged_line_is_reported(tmp_path: Path) -> None:
    path = write_lut(tmp_path / "rag.csv")
    lines = path.read_text().splitlines()
    lines[6] += ",extra"
    path.write_text("\n".join(lines) + "\n")
    issue = _only(path)
    assert issue.key_path == "line 7"
    assert issue.problem == "not a readable CSV table"


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    assert _only(path).problem == "empty LUT file"
    path.write_text("\n  \n")
    assert _only(path).problem == "empty LUT file"


def test_header_only(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "h.csv", [])
    issue = _only(path)
    assert issue.problem == "LUT file has no data rows"


def test_missing_file(tmp_path: Path) -> None:
    issue = _only(tmp_path / "nowhere.csv")
    assert issue.problem == "not found"


def test_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "lut.xlsx"
    path.write_text("x")
    assert _only(path).problem == "unknown LUT file type"


@pytest.mark.skipif(find_spec("pyarrow") is not None, reason="pyarrow is installed")
def test_parquet_without_pyarrow_says_how_to_install(tmp_path: Path) -> None:
    path = tmp_path / "lut.parquet"
    path.write_bytes(b"PAR1")
    issue = _only(path)
    assert "pip install pyarrow" in issue.allowed
    assert "parquet" in issue.allowed


@pytest.mark.skipif(find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_parquet_round_trip(tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame(grid_rows())
    frame.loc[2, "latency_ms"] = -3.0
    path = tmp_path / "lut.parquet"
    frame.to_parquet(path)
    issue = _only(path)
    assert issue.key_path == "row 4, column latency_ms"
    frame.loc[2, "latency_ms"] = 3.0
    frame.to_parquet(path)
    assert len(load_lut(path, use_cache=False).keys()) == 1


def test_short_line_is_padded_with_empty_cells(tmp_path: Path) -> None:
    """A line with fewer fields than the header reads as empty trailing cells."""
    path = write_lut(tmp_path / "short.csv")
    lines = path.read_text().splitlines()
    fields = lines[3].split(",")
    lines[3] = ",".join(fields[: COLUMNS.index("energy_mj")])
    path.write_text("\n".join(lines) + "\n")
    issues = _issues(path)
    assert {i.key_path for i in issues} >= {"row 4, column energy_mj"}
    assert all(i.problem == "missing value" for i in issues)


def test_cells_are_stripped_and_quoted_cells_read_whole(tmp_path: Path) -> None:
    path = write_lut(tmp_path / "spaced.csv")
    lines = path.read_text().splitlines()
    fields = lines[2].split(",")
    point = [int(fields[COLUMNS.index(c)]) for c in ("context_len", "microbatch", "fanout_k")]
    fields[COLUMNS.index("latency_ms")] = "  " + fields[COLUMNS.index("latency_ms")] + "\t"
    fields[COLUMNS.index("phase")] = " " + fields[COLUMNS.index("phase")] + " "
    fields[COLUMNS.index("notes")] = '"a note, with a comma"'
    lines[2] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")
    plain = load_lut(write_lut(tmp_path / "plain.csv"), use_cache=False)
    spaced = load_lut(path, use_cache=False)
    key = next(iter(plain.keys()))
    assert spaced.row_count == plain.row_count
    assert spaced.lookup(key, *point) == plain.lookup(key, *point)


def test_digit_separators_are_not_numbers(tmp_path: Path) -> None:
    path = write_lut(tmp_path / "sep.csv")
    lines = path.read_text().splitlines()
    fields = lines[1].split(",")
    fields[COLUMNS.index("latency_ms")] = "1_0"
    lines[1] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")
    issue = _only(path)
    assert (issue.key_path, issue.problem) == ("row 2, column latency_ms", "not a number")
