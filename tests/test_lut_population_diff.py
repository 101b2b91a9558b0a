"""Regression detection: ``python -m lut_population diff OLD NEW``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lut_population.__main__ import main
from lut_population.diff import diff_files
from simulator.errors import InputError

HEADER = (
    "phase,model,hardware,tensor_parallel,pipeline_parallel,context_len,microbatch,fanout_k,"
    "dtype,latency_ms,peak_mem_mb,kv_delta_mb,energy_mj,source,notes\n"
)


def lut(path: Path, latencies: list[float], energy: float = 100.0) -> Path:
    rows = [
        f"draft_decode,m,hw,1,1,{128 * (i + 1)},1,1,fp16,{lat},1000,0.5,{energy},s,\n"
        for i, lat in enumerate(latencies)
    ]
    path.write_text(HEADER + "".join(rows), encoding="utf-8")
    return path


def test_small_changes_pass_and_large_ones_are_flagged(tmp_path):
    old = lut(tmp_path / "old.csv", [10.0, 20.0, 30.0])
    same = lut(tmp_path / "same.csv", [10.4, 20.0, 30.0])  # +4 %
    moved = lut(tmp_path / "moved.csv", [10.0, 21.2, 30.0])  # +6 %
    assert not diff_files(old, same).flagged
    report = diff_files(old, moved)
    assert report.flagged
    assert [(m.column, m.row[6]) for m in report.moved] == [("latency_ms", "256")]
    assert report.moved[0].change == pytest.approx(0.06)
    assert main(["diff", str(old), str(same)]) == 0
    assert main(["diff", str(old), str(moved)]) == 1


def test_threshold_is_configurable(tmp_path):
    old = lut(tmp_path / "old.csv", [10.0])
    new = lut(tmp_path / "new.csv", [10.3])
    assert not diff_files(old, new, threshold=0.05).flagged
    assert diff_files(old, new, threshold=0.02).flagged
    assert main(["diff", str(old), str(new), "--threshold-pct", "2"]) == 1
    assert main(["diff", str(old), str(new), "--threshold-pct", "-1"]) == 2


def test_energy_and_missing_rows_are_flagged_added_rows_are_not(tmp_path):
    old = lut(tmp_path / "old.csv", [10.0, 20.0])
    hotter = lut(tmp_path / "hot.csv", [10.0, 20.0], energy=120.0)
    shorter = lut(tmp_path / "short.csv", [10.0])
    longer = lut(tmp_path / "long.csv", [10.0, 20.0, 30.0])
    assert {m.column for m in diff_files(old, hotter).moved} == {"energy_mj"}
    report = diff_files(old, shorter)
    assert report.flagged
    assert len(report.missing) == 1
    report = diff_files(old, longer)
    assert not report.flagged
    assert len(report.added) == 1


def test_directories_are_matched_by_file_name(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    lut(tmp_path / "a" / "x.csv", [10.0])
    lut(tmp_path / "a" / "gone.csv", [10.0])
    lut(tmp_path / "b" / "x.csv", [10.0])
    report = diff_files(tmp_path / "a", tmp_path / "b")
    assert report.files_missing == ("gone.csv",)
    assert report.flagged


def test_bad_input_is_reported_with_file_and_cell(tmp_path, capsys):
    old = lut(tmp_path / "old.csv", [10.0])
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "draft_decode,m,hw,1,1,128,1,1,fp16,fast,1,1,1,s,\n", encoding="utf-8")
    with pytest.raises(InputError, match="row 2, column latency_ms"):
        diff_files(old, bad)
    assert main(["diff", str(old), str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv" in capsys.readouterr().err


def test_identical_committed_lut_has_no_moves():
    path = Path(__file__).resolve().parents[1] / "lut" / "llama-68m__a100-sxm4-80gb.csv"
    report = diff_files(path, path)
    assert not report.flagged
    assert report.compared == len(pd.read_csv(path))
