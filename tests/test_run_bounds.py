"""Runs whose simulated time is astronomical still end in bounded time and memory.

The time series is sampled over simulated time, but a quiet stretch (no
event) is written as its first sample only, so the rows a run writes grow
with the events it simulates, not with its simulated seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simulator import load_scenario, run
from simulator.limits import MAX_LUT_LATENCY_MS
from tests.engine_fixtures import synthetic, write_scenario

Build = Callable[[Path], Path]


def _scenario(**kwargs: Any) -> Build:
    def build(tmp_path: Path) -> Path:
        settings: dict[str, Any] = {"mode": "distributed", "workload": synthetic(4, 1.0, 100, 10)}
        settings.update(kwargs)
        return write_scenario(tmp_path, **settings)

    return build


def _two_arrivals(tmp_path: Path, second_s: str) -> dict[str, Any]:
    """A trace workload of two requests, at 0 and at ``second_s``."""
    (tmp_path / "trace.csv").write_text(
        f"arrival_s,prompt_tokens,output_tokens\n0,100,10\n{second_s},100,10\n"
    )
    return {"source": "trace://trace.csv", "format": "csv", "slo": {"ttft_ms": 100, "tpot_ms": 10}}


def _trace_gap(tmp_path: Path) -> Path:
    return write_scenario(tmp_path, mode="distributed", workload=_two_arrivals(tmp_path, "1e15"))


def _slow_lut(tmp_path: Path) -> Path:
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(3, 1.0, 100, 10),
        target_phases={
            "prefill": lambda c, b, _k: MAX_LUT_LATENCY_MS,
            "draft_decode": lambda c, b, _k: MAX_LUT_LATENCY_MS,
        },
    )
    lut = tmp_path / "target.csv"
    pd.read_csv(lut).assign(energy_mj=0.0).to_csv(lut, index=False)
    return path


ASTRONOMICAL: dict[str, Build] = {
    "trace gap of 1e15 s (the latest arrival allowed)": _trace_gap,
    "bandwidth 1e-12 Mbit/s": _scenario(
        link={"src": "laptops", "dst": "pool", "rtt_ms": 1, "bw_mbps": 1e-12}
    ),
    "RTT 1e12 ms": _scenario(
        link={"src": "laptops", "dst": "pool", "rtt_ms": 1e12, "bw_mbps": 100}
    ),
    "loss at the limit of 90 %": _scenario(
        link={"src": "laptops", "dst": "pool", "rtt_ms": 1, "bw_mbps": 100, "loss_pct": 90}
    ),
    "arrival_scale 1e-9": _scenario(extra={"workload.arrival_scale": 1e-9}),
    "timeseries interval 1e-9 s": _scenario(extra={"metrics.timeseries_interval_s": 1e-9}),
    "LUT latency at its limit of 1e9 ms": _slow_lut,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ASTRONOMICAL))
def test_astronomical_simulated_time_ends_with_bounded_samples(tmp_path, name):
    scenario = load_scenario(ASTRONOMICAL[name](tmp_path))
    started = time.perf_counter()
    result = run(scenario)
    assert time.perf_counter() - started < 20
    requests = result.requests
    assert len(requests) == len(scenario_requests := result.output.records)
    assert len(result.timeseries) <= 200 * max(1, len(scenario_requests))
    summary = result.summary["requests"]
    assert summary["arrived"] == summary["completed"] + summary["rejected"] + summary["unfinished"]
    assert not math.isnan(result.output.simulated_s)


def test_a_quiet_stretch_keeps_its_first_and_last_samples_only(tmp_path):
    workload = _two_arrivals(tmp_path, "100.5")
    result = run(load_scenario(write_scenario(tmp_path, mode="none", workload=workload)))
    times = list(result.timeseries["time_s"])
    assert times[:2] == [1.0, 2.0]
    assert times[2:4] == [100.0, 101.0]
    assert len(times) < 10
    quiet = result.timeseries.set_index("time_s").drop(columns="mean_k")
    assert quiet.loc[2.0].equals(quiet.loc[100.0])
