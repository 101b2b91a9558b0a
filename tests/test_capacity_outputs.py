"""``simulate capacity``: the default target, ``-o DIR`` with its probes table, what caps attainment."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pytest

from simulator.capacity_bounds import DEFAULT_SLO_ATTAINMENT
from simulator.cli import main
from simulator.commands import capacity as capacity_command
from simulator.sweeps.capacity_table import PROBE_COLUMNS
from tests.engine_fixtures import write_scenario

SLO = {"ttft_ms": 1000, "tpot_ms": 100, "tvt_ms": 200}


def too_long_scenario(tmp_path: Path) -> Path:
    """20 requests, 2 of them beyond the fixture LUTs' context window (131072 tokens).

    131045 + 20 tokens + k_max = 8 draft tokens do not fit: those two are
    rejected with reason ``context_window`` at every rate, so attainment is at
    most 18 / 20 = 90 %.
    """
    rows = ["arrival_s,prompt_tokens,output_tokens"]
    for i in range(20):
        rows.append(f"{i * 0.1:.1f},64,16" if i % 10 != 3 else f"{i * 0.1:.1f},131045,20")
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    return write_scenario(
        tmp_path, mode="distributed", workload={"source": "trace://trace.csv", "slo": SLO}
    )


def test_context_window_rejections_are_named_as_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = too_long_scenario(tmp_path)
    out = tmp_path / "out"
    argv = ["capacity", str(path), "--slo-attainment", "0.95", "-o", str(out), "--low", "0.5"]
    assert main(argv) == 0
    verdict = (
        "no rate meets SLO attainment 95.0%: even arrival_scale 0.5 fails; 2 context_window "
        "rejections of 20 measured requests cap attainment at 90.0% at any rate"
    )
    assert verdict in capsys.readouterr().out
    probes = pd.read_csv(out / "probes.csv")
    assert list(probes.columns) == list(PROBE_COLUMNS)
    assert len(probes) == 1
    first = probes.iloc[0]
    assert first["probe"] == 1 and first["arrival_scale"] == 0.5
    assert (first["measured_requests"], first["completed"], first["rejected"]) == (20, 18, 2)
    assert json.loads(first["rejected_by_reason"]) == {"context_window": 2}
    assert first["slo_attainment"] == pytest.approx(0.9) and not first["passed"]
    result = json.loads((out / "capacity.json").read_text())
    assert result["max_requests_per_s"] is None and result["verdict"] == verdict
    assert sorted(p.name for p in out.iterdir()) == ["capacity.json", "probes.csv"]


def test_default_target_is_plans_and_every_probe_is_a_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    capacity_command.add_arguments(parser)
    assert parser.parse_args(["s.yaml"]).slo_attainment == DEFAULT_SLO_ATTAINMENT == 0.9
    path = too_long_scenario(tmp_path)
    out = tmp_path / "out"
    argv = ["capacity", str(path), "-o", str(out), "--low", "0.5", "--high", "2", "-q"]
    assert main(argv) == 0  # no --slo-attainment: 0.9
    line = capsys.readouterr().out
    assert line.startswith("capacity at SLO attainment 90.0%")
    probes = pd.read_csv(out / "probes.csv")
    assert list(probes["arrival_scale"][:2]) == [0.5, 2.0]
    assert len(probes) == json.loads((out / "capacity.json").read_text())["probes"] > 2
    passed = probes[probes["passed"]]
    assert (passed["slo_attainment"] >= 0.9).all()
    best = json.loads((out / "capacity.json").read_text())["max_arrival_scale"]
    assert best == pytest.approx(passed["arrival_scale"].max())
    # Run again into the same directory: it holds results only, so it is replaced whole.
    assert main(argv) == 0


def test_misses_are_listed_when_no_fixed_rejection_caps_attainment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = too_long_scenario(tmp_path)
    argv = ["capacity", str(path), "--set", "workload.slo.ttft_ms=1", "--low", "0.5", "-q"]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == (
        "no rate meets SLO attainment 90.0%: even arrival_scale 0.5 fails; there attainment is "
        "0.0%: of 20 measured requests, 2 rejected (context_window 2), "
        "18 completed outside an SLO (TTFT 18)"
    )


def test_output_dir_follows_the_run_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = too_long_scenario(tmp_path)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert main(["capacity", str(path), "-o", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert "-o/--output" in err and "not a directory" in err and "Traceback" not in err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.md").write_text("mine")
    assert main(["capacity", str(path), "-o", str(other)]) == 2
    err = capsys.readouterr().err
    assert "holds notes.md, which are not results" in err
    assert (other / "notes.md").read_text() == "mine"
