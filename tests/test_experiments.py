"""The fixed-batch experiment of docs/experiments.md runs and reads as documented."""

from __future__ import annotations

import pytest

from simulator import load_scenario, run
from tests.golden.runs import ROOT

FIXED_BATCH = ROOT / "scenarios" / "experiments" / "fixed_batch.yaml"


def test_fixed_batch_runs_waves_of_b_with_one_steady_tpot():
    result = run(load_scenario(FIXED_BATCH))
    frame = result.requests
    users = result.scenario.workload.closed_loop.users
    assert (frame["outcome"] == "completed").all()
    waves = frame.groupby("arrival_s").size()
    assert list(waves) == [users] * (len(frame) // users)  # B at t = 0, then B per wave
    assert waves.index[0] == 0.0
    tpot = result.summary["latency_ms"]["tpot"]
    assert tpot["p50"] == pytest.approx(tpot["p99"]) == pytest.approx(tpot["mean"])
    assert frame["tpot_ms"].max() - frame["tpot_ms"].min() < 1e-9
    expected_e2e = frame["ttft_ms"] + (frame["output_tokens"] - 1) * frame["tpot_ms"]
    assert frame["e2e_ms"].to_numpy() == pytest.approx(expected_e2e.to_numpy())


def test_fixed_batch_warmup_leaves_out_the_first_wave():
    result = run(load_scenario(FIXED_BATCH, overrides=["metrics.warmup_s=1"]))
    users = result.scenario.workload.closed_loop.users
    assert result.summary["measurement"]["warmup_requests"] == users
    assert result.summary["requests"]["measured"] == len(result.requests) - users
    assert result.summary["requests"]["completed"] == len(result.requests) - users
