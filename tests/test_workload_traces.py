import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from simulator.errors import InputError
from simulator.workload import detect_format, load_trace, read_trace
from simulator.workload.issue_collector import ISSUES_PER_KIND

TRACES = Path(__file__).resolve().parent.parent / "scenarios" / "traces"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- the shipped slices ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt", "rows", "first", "last", "last_arrival_s"),
    [
        # Values read off the first and last data lines of each slice; last
        # arrival = last TIMESTAMP minus first (18:45:33.9898730 - 18:15:46.6805900).
        ("azure_conv_10k.csv", "azure", 10_000, (374, 44), (399, 83), 1787.309283),
        # 18:31:17.0593070 - 18:17:03.9799600
        ("azure_code_2k.csv", "azure", 2_000, (4808, 10), (1697, 36), 853.079347),
        # 19:14:19.9280160 - 18:17:03.9799600 (the whole code trace)
        ("azure_code_1h.csv", "azure", 8_819, (4808, 10), (549, 173), 3435.948056),
        # 19:14:08.4025270 - 18:15:46.6805900 (the whole conversation trace)
        ("azure_conv_1h.csv", "azure", 19_366, (374, 44), (197, 183), 3501.721937),
        # timestamp_ms 669000 - 0
        ("mooncake_conv_2k.csv", "mooncake", 2_000, (6758, 500), (1504, 462), 669.0),
    ],
)
def test_real_slices_read_with_expected_values(name, fmt, rows, first, last, last_arrival_s):
    table = read_trace(TRACES / name)
    assert table.format == fmt
    assert len(table) == rows
    assert table.dropped_rows == 0
    assert (int(table.prompt_tokens[0]), int(table.output_tokens[0])) == first
    assert (int(table.prompt_tokens[-1]), int(table.output_tokens[-1])) == last
    assert table.arrival_s is not None
    assert table.arrival_s[0] == 0.0
    assert np.all(np.diff(table.arrival_s) >= 0)
    assert table.arrival_s[-1] == pytest.approx(last_arrival_s, abs=1e-6)
    assert table.prompt_tokens.dtype == np.int64 and table.prompt_tokens.min() >= 1
    assert table.slo_class is None and table.origin is None


def test_azure_second_row_offset_matches_timestamps():
    table = read_trace(TRACES / "azure_conv_10k.csv")
    # 18:15:50.9951690 - 18:15:46.6805900
    assert table.arrival_s is not None
    assert table.arrival_s[1] == pytest.approx(4.314579, abs=1e-9)


def test_mooncake_keeps_simultaneous_arrivals():
    table = read_trace(TRACES / "mooncake_conv_2k.csv")
    assert table.arrival_s is not None
    # The first four rows of the Mooncake conversation trace share timestamp 0.
    assert list(table.arrival_s[:4]) == [0.0, 0.0, 0.0, 0.0]


def test_vidur_lengths_file_has_no_arrivals():
    table = read_trace(TRACES / "arxiv_summarization_lengths_2k.csv")
    assert table.format == "vidur"
    assert len(table) == 2_000
    assert table.arrival_s is None and not table.has_arrivals
    assert (int(table.prompt_tokens[0]), int(table.output_tokens[0])) == (3772, 54)
    assert (int(table.prompt_tokens[-1]), int(table.output_tokens[-1])) == (3108, 226)


def test_tables_are_read_only():
    table = read_trace(TRACES / "mooncake_conv_2k.csv")
    with pytest.raises(ValueError):
        table.prompt_tokens[0] = 5


# -- format detection and generic formats ---------------------------------------


def test_detect_format_by_header_and_extension(tmp_path):
    assert detect_format(TRACES / "azure_code_2k.csv") == "azure"
    assert detect_format(TRACES / "mooncake_conv_2k.csv") == "mooncake"
    assert detect_format(TRACES / "arxiv_summarization_lengths_2k.csv") == "vidur"
    generic = write(tmp_path / "g.csv", "arrival_s,prompt_tokens,output_tokens\n0,1,1\n")
    assert detect_format(generic) == "csv"
    lines = write(
        tmp_path / "g.jsonl", '{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n'
    )
    assert detect_format(lines) == "jsonl"
    moon = write(tmp_path / "m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 2}\n')
    assert detect_format(moon) == "mooncake"


def test_generic_csv_with_classes_and_origins(tmp_path):
    path = write(
        tmp_path / "t.csv",
        "arrival_s,prompt_tokens,output_tokens,slo_class,origin\n"
        "10.5,100,20,gold,phone\n"
        "11.0,200,30,,\n"
        "12.25,300,40,default,laptop\n",
    )
    table = read_trace(path)
    assert table.format == "csv"
    assert table.arrival_s is not None
    assert list(table.arrival_s) == [0.0, 0.5, 1.75]
    assert list(table.prompt_tokens) == [100, 200, 300]
    assert list(table.output_tokens) == [20, 30, 40]
    assert table.slo_class is not None and table.slo_class.tolist() == ["gold", "", "default"]
    assert table.origin is not None and table.origin.tolist() == ["phone", "", "laptop"]


def test_generic_csv_without_arrivals_is_lengths_only(tmp_path):
    table = read_trace(write(tmp_path / "t.csv", "prompt_tokens,output_tokens\n5,6\n7,8\n"))
    assert table.arrival_s is None
    assert list(table.prompt_tokens) == [5, 7]


def test_generic_jsonl_and_mooncake_jsonl(tmp_path):
    path = write(
        tmp_path / "t.jsonl",
        '{"arrival_s": 1.0, "prompt_tokens": 10, "output_tokens": 2, "origin": null}\n'
        "\n"
        '{"arrival_s": 3.0, "prompt_tokens": 20, "output_tokens": 4, "slo_class": "gold"}\n',
    )
    table = read_trace(path)
    assert table.arrival_s is not None and list(table.arrival_s) == [0.0, 2.0]
    assert table.slo_class is not None and table.slo_class.tolist() == ["", "gold"]
    assert table.source_rows is not None and list(table.source_rows) == [1, 3]
    moon = write(
        tmp_path / "m.jsonl",
        '{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1]}\n'
        '{"timestamp": 3052, "input_length": 7234, "output_length": 794, "hash_ids": [0]}\n',
    )
    table = read_trace(moon)
    assert table.format == "mooncake"
    assert table.arrival_s is not None and list(table.arrival_s) == [0.0, 3.052]


def test_real_format_drops_zero_length_rows_and_counts_them(tmp_path):
    path = write(
        tmp_path / "m.csv",
        "timestamp_ms,input_length,output_length,num_kv_blocks_512,prefix_reuse_blocks\n"
        "1000,100,0,1,0\n"
        "2000,200,5,1,0\n"
        "3500,0,7,1,0\n"
        "4000,300,9,1,0\n",
    )
    table = read_trace(path)
    assert table.dropped_rows == 2
    assert list(table.prompt_tokens) == [200, 300]
    assert table.arrival_s is not None and list(table.arrival_s) == [0.0, 2.0]
    assert table.source_rows is not None and list(table.source_rows) == [2, 4]


# -- bad files ------------------------------------------------------------------


def issue_keys(path: Path, fmt: str = "auto") -> list[str]:
    table, issues = load_trace(path, fmt)
    assert table is None
    assert all(issue.file == str(path) for issue in issues)
    return [issue.key_path for issue in issues]


def test_missing_and_empty_files(tmp_path):
    _, issues = load_trace(tmp_path / "nope.csv")
    assert [i.problem for i in issues] == ["trace file not found"]
    empty = write(tmp_path / "e.csv", "")
    _, issues = load_trace(empty)
    assert issues[0].problem == "empty trace"
    header = write(tmp_path / "h.csv", "arrival_s,prompt_tokens,output_tokens\n")
    _, issues = load_trace(header)
    assert issues[0].problem == "empty trace" and issues[0].key_path == ""


def test_zero_nan_fraction_and_text_lengths_in_generic_csv(tmp_path):
    path = write(
        tmp_path / "t.csv",
        "arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,10,0\n2,NaN,5\n3,12.5,5\n4,ten,5\n5,,5\n",
    )
    table, issues = load_trace(path)
    assert table is None
    found = {(i.key_path, i.problem) for i in issues}
    assert found == {
        ("row 2, column output_tokens", "too small"),
        ("row 3, column prompt_tokens", "not a finite number"),
        ("row 4, column prompt_tokens", "not a whole number"),
        ("row 5, column prompt_tokens", "not a finite number"),
        ("row 6, column prompt_tokens", "missing value"),
    }
    zero = next(i for i in issues if i.key_path == "row 2, column output_tokens")
    assert zero.value == "'0'" and ">= 1" in zero.allowed


def test_unsorted_generic_timestamps(tmp_path):
    path = write(
        tmp_path / "t.csv",
        "arrival_s,prompt_tokens,output_tokens\n0,1,1\n5,1,1\n4,1,1\n6,1,1\n",
    )
    _, issues = load_trace(path)
    assert [i.key_path for i in issues] == ["row 3, column arrival_s"]
    assert "backwards" in issues[0].problem and "row 2" in issues[0].allowed


def test_unknown_and_missing_columns(tmp_path):
    path = write(tmp_path / "t.csv", "arrival_s,prompt_token,output_tokens\n0,1,1\n")
    _, issues = load_trace(path)
    by_key = {i.key_path: i for i in issues}
    assert set(by_key) == {"column prompt_tokens", "column prompt_token"}
    assert "did you mean 'prompt_tokens'" in by_key["column prompt_token"].problem
    assert by_key["column prompt_tokens"].problem.startswith("missing column")


def test_explicit_format_mismatch_names_missing_columns(tmp_path):
    keys = issue_keys(TRACES / "mooncake_conv_2k.csv", "azure")
    assert keys == ["column TIMESTAMP", "column ContextTokens", "column GeneratedTokens"]


def test_bad_azure_timestamp_and_negative_real_length(tmp_path):
    path = write(
        tmp_path / "a.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "yesterday,396,109\n"
        "2023-11-16 18:15:51.2224670,-3,55\n",
    )
    assert set(issue_keys(path)) == {"row 2, column TIMESTAMP", "row 3, column ContextTokens"}


def test_malformed_jsonl_lines(tmp_path):
    path = write(
        tmp_path / "t.jsonl",
        '{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n'
        "{not json\n"
        "[1, 2]\n"
        '{"arrival_s": 1, "prompt_tokens": true, "output_tokens": 1}\n',
    )
    assert issue_keys(path) == [
        "row 2, column (line)",
        "row 3, column (line)",
        "row 4, column prompt_tokens",
    ]


@pytest.mark.parametrize("first", [True, False])
def test_a_jsonl_line_nested_too_deeply_is_an_issue_not_a_recursion_error(tmp_path, first):
    good = '{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n'
    deep = "[" * 5000 + "]" * 5000 + "\n"
    path = write(tmp_path / "t.jsonl", deep + good if first else good + deep)
    _, issues = load_trace(path)
    assert [(i.key_path, i.problem) for i in issues] == [
        (f"row {1 if first else 2}, column (line)", "nested too deeply to read")
    ]


def test_ragged_csv_is_an_issue_not_an_exception(tmp_path):
    path = write(tmp_path / "t.csv", "arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,2,3,4,5\n")
    _, issues = load_trace(path)
    assert issues and issues[0].problem == "cannot parse the trace"


def test_many_bad_rows_are_capped_with_a_summary(tmp_path):
    rows = "".join(f"{i},0,1\n" for i in range(50))
    path = write(tmp_path / "t.csv", "arrival_s,prompt_tokens,output_tokens\n" + rows)
    _, issues = load_trace(path)
    assert len(issues) == ISSUES_PER_KIND + 1
    summary = issues[-1]
    assert summary.key_path == "column prompt_tokens"
    assert summary.value == repr(f"{50 - ISSUES_PER_KIND} more rows")


def test_read_trace_raises_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_trace(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="unknown format"):
        read_trace(TRACES / "azure_code_2k.csv", "parquet")


# -- provenance -----------------------------------------------------------------


def test_sources_md_records_each_slice_and_its_licence():
    text = (TRACES / "SOURCES.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| `([^`]+\.csv)` \| [^|]+ \| ([\d,]+) \| `([0-9a-f]{64})` \|$", text, re.M
    )
    shipped = sorted(p.name for p in TRACES.glob("*.csv"))
    assert sorted(name for name, _, _ in rows) == shipped
    for name, size, digest in rows:
        data = (TRACES / name).read_bytes()
        assert len(data) == int(size.replace(",", "")), name
        assert hashlib.sha256(data).hexdigest() == digest, name
    for licence in re.findall(r"\(LICENSES/([^)]+)\)", text):
        assert (TRACES / "LICENSES" / licence).is_file(), licence
    # The slices stay small: the largest is the conversation trace's whole hour (719 kB), the
    # load that rises and falls for the online planner's evidence.
    assert sum(len((TRACES / n).read_bytes()) for n in shipped) < 1_700_000


@pytest.mark.parametrize(
    ("header", "fmt"),
    [
        ("arrival_s,prompt_tokens,output_tokens,prompt_tokens", "csv"),
        ('TIMESTAMP, ContextTokens,GeneratedTokens,"ContextTokens"', "azure"),
    ],
)
def test_repeated_column_is_named_as_written(tmp_path, header, fmt):
    """pandas reads a repeated header name as ``x.1``; the message names ``x``."""
    row = "2023-11-16 18:15:46.6805900,1,1,2" if fmt == "azure" else "0,1,1,2"
    path = write(tmp_path / "t.csv", f"{header}\n{row}\n")
    table, issues = load_trace(path, fmt)
    assert table is None
    name = header.split(",")[1].strip()
    assert [i.key_path for i in issues] == [f"column {name}"]
    assert issues[0].value == repr(name)
    assert "repeated column" in issues[0].problem and "fields 2 and 4" in issues[0].problem
    assert ".1" not in str(issues[0])
