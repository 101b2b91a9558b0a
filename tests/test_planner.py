"""The online goodput planner: known-best choice, adaptation to a rate change, determinism."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simulator import load_scenario, run
from simulator.outputs import PLANNER_LOG, write_results
from simulator.scenario.model import Scenario
from tests.engine_fixtures import write_scenario

SLO = {"ttft_ms": 2000, "tpot_ms": 200}


def _trace(
    path: Path, phases: list[tuple[float, float]], prompt_tokens: int = 100, output_tokens: int = 50
) -> None:
    """Evenly spaced arrivals: ``(rate_per_s, duration_s)`` phases back to back."""
    rows: list[float] = []
    start_s = 0.0
    for rate, duration_s in phases:
        rows += [start_s + i / rate for i in range(int(rate * duration_s))]
        start_s += duration_s
    lines = "".join(f"{t:.6f},{prompt_tokens},{output_tokens}\n" for t in rows)
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + lines)


def _scenario(
    tmp_path: Path,
    phases: list[tuple[float, float]],
    replicas: int,
    planner: dict[str, Any] | None = None,
    name: str = "scenario.yaml",
) -> Scenario:
    """Verify-bound: a verify round costs 30 ms per request in the batch (no batching gain),
    drafting and prefill are nearly free, so only more replicas add capacity (about 2
    requests per second each)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    _trace(tmp_path / "trace.csv", phases)
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload={"source": "trace://trace.csv", "format": "csv", "slo": SLO},
        target_phases={
            "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
            "verify": lambda c, b, _k: 30.0 * b,
        },
        draft_phases={"prefill": lambda c, b, _k: 1.0, "draft_decode": lambda c, b, _k: 1.0},
        clients=400,
        replicas=replicas,
        extra={"planner": planner or {}},
        name=name,
    )
    return load_scenario(path)


def _planner(window_s: float) -> dict[str, Any]:
    return {
        "enabled": True,
        "interval_s": 10,
        "window_s": window_s,
        "model_load_s": 2.0,
        "objectives": ["goodput", "p95_tpot"],
        "candidates": {"verify_replicas": [2, 4, 8]},
    }


def _goodput(scenario: Scenario) -> float:
    value = run(scenario).summary["goodput"]["requests_per_gpu_s"]
    assert value is not None
    return float(value)


@pytest.mark.slow
def test_the_planner_finds_the_known_best_replica_count(tmp_path):
    """At 6 requests/s, 2 replicas are overloaded and 8 idle half the time: 4 is best.

    The fixed runs confirm it by construction; the planner, started on 2,
    chooses 4 at every round.
    """
    fixed = {n: _goodput(_scenario(tmp_path / f"f{n}", [(6, 60)], n)) for n in (2, 4, 8)}
    assert max(fixed, key=lambda n: fixed[n]) == 4
    result = run(_scenario(tmp_path / "a", [(6, 60)], 2, _planner(20)))
    chosen = result.planner_log[result.planner_log["chosen"]]
    assert len(chosen) >= 5
    assert set(chosen["candidate"]) == {"verify_replicas=4"}
    # The change is visible: two replicas loading, then four serving.
    ts = result.timeseries
    assert set(ts["state"]) >= {"loading", "serving"}
    assert ts[ts["time_s"] >= 20]["replicas_active"].eq(4).all()


@pytest.mark.slow
def test_the_planner_adapts_to_a_doubled_rate_and_beats_the_first_half_best(tmp_path):
    """3 requests/s for 60 s, then 6: the best fixed count for the first half is 2.

    The planner moves to more replicas within two intervals of the change
    and its goodput over the whole run beats the fixed 2.
    """
    phases = [(3.0, 60.0), (6.0, 60.0)]
    first = {n: _goodput(_scenario(tmp_path / f"h{n}", phases[:1], n)) for n in (2, 4, 8)}
    best_first = max(first, key=lambda n: first[n])
    assert best_first == 2
    fixed = _goodput(_scenario(tmp_path / "fixed", phases, best_first))
    result = run(_scenario(tmp_path / "p", phases, 2, _planner(20)))
    log = result.planner_log
    chosen = log[log["chosen"]].set_index("time_s")["candidate"]
    assert (chosen[chosen.index <= 60] == "verify_replicas=2").all()
    assert chosen[70.0] != "verify_replicas=2" or chosen[80.0] != "verify_replicas=2"
    assert (chosen[chosen.index >= 80] != "verify_replicas=2").all()
    planned = result.summary["goodput"]["requests_per_gpu_s"]
    assert planned > fixed * 1.5, (planned, fixed)


@pytest.mark.slow
def test_same_seed_gives_an_identical_planner_log(tmp_path):
    """Two runs of the same scenario write byte-identical planner logs and time series."""
    texts = []
    for sub in ("one", "two"):
        result = run(_scenario(tmp_path / sub, [(6, 40)], 2, _planner(10)))
        paths = write_results(result, tmp_path / sub / "out")
        names = {p.name: p for p in paths}
        assert PLANNER_LOG in names
        texts.append((names[PLANNER_LOG].read_text(), names["timeseries.csv"].read_text()))
    assert texts[0] == texts[1]
    log = pd.read_csv(tmp_path / "one" / "out" / PLANNER_LOG)
    assert {"time_s", "candidate", "est_goodput", "est_p95_tpot", "chosen"} <= set(log.columns)
    assert {"realised_goodput"} <= set(log.columns)
    assert log.groupby("time_s")["chosen"].sum().eq(1).all()


def test_without_a_planner_no_log_and_no_state_columns(tmp_path):
    """A run without a planner writes no planner log and its time series is unchanged."""
    result = run(_scenario(tmp_path, [(3, 10)], 2))
    assert result.planner_log.empty
    assert "state" not in result.timeseries.columns
    paths = write_results(result, tmp_path / "out")
    assert PLANNER_LOG not in {p.name for p in paths}


def test_removed_replicas_drain_and_stop_counting(tmp_path):
    """Started on 8 at a light load, the planner drops to 2: the others drain, then retire,
    and the run's GPU-seconds count them only while they held their GPUs."""
    result = run(_scenario(tmp_path, [(3, 60)], 8, _planner(10)))
    chosen = result.planner_log[result.planner_log["chosen"]]
    assert chosen["candidate"].iloc[0] == "verify_replicas=2"
    spans = result.output.replica_spans_s
    assert sum(1 for _, off in spans if off < 15.0) == 6
    gpu_hours = result.summary["resources"]["gpu_hours"]
    assert gpu_hours < 8 * result.output.simulated_s / 3600.0 * 0.5
    ts = result.timeseries
    assert "retired" in set(ts["state"])


def test_the_report_draws_the_planner_decisions(tmp_path):
    """A planner run's results load with their log and get the planner figure."""
    from simulator.report import figures
    from simulator.report.document import figure_specs
    from simulator.report.results import load_run

    result = run(_scenario(tmp_path, [(6, 30)], 2, _planner(10)))
    write_results(result, tmp_path / "out")
    loaded = load_run(tmp_path / "out")
    assert not loaded.planner_log.empty
    assert figures.has_planner(loaded)
    assert "planner" in {spec.stem for spec in figure_specs([loaded])}
    ax = figures.planner_decisions(loaded)
    assert ax.get_title() == f"Planner decisions ({loaded.name})"
    # every pool its own line style and marker, so overlapping pools stay apart
    # two pools with the same counts: each its own line style and marker, so both show
    series = loaded.timeseries
    twin = replace(loaded, timeseries=pd.concat([series, series.assign(pool="twin_pool")]))
    lines = figures.planner_decisions(twin).lines
    serving = [line for line in lines if str(line.get_label()).endswith(" serving")]
    assert len(serving) == 2
    assert len({(line.get_linestyle(), line.get_marker()) for line in serving}) == 2
    # decision numbers sit in a strip above the axes, the legend and the key below them
    figure = ax.get_figure(root=True)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    numbers = [t for t in ax.texts if t.get_text().isdigit()]
    assert numbers and all(t.get_window_extent(renderer).y0 >= box.y1 for t in numbers)
    assert ax.get_legend().get_window_extent(renderer).y1 < box.y0
    chosen = loaded.planner_log[loaded.planner_log["chosen"]]
    (key,) = [t for t in ax.texts if t.get_text().startswith("chosen candidates")]
    assert f"1  {chosen['candidate'].iloc[0]}" in key.get_text()
    assert key.get_window_extent(renderer).y1 < box.y0


@pytest.mark.slow
def test_hill_climbing_walks_to_the_known_best_evaluating_neighbours_only(tmp_path):
    """With search: hill_climb over 1..8 replicas, started on 2, the planner reaches 4 within
    two rounds and stays next to it, evaluating at most three candidates a round (the
    current count and one step each way)."""
    planner = {**_planner(20), "search": "hill_climb"}
    planner["candidates"] = {"verify_replicas": [1, 2, 3, 4, 5, 6, 7, 8]}
    result = run(_scenario(tmp_path, [(6, 60)], 2, planner))
    log = result.planner_log
    assert log.groupby("time_s").size().max() <= 3
    first = log[log["time_s"] == 10.0]["candidate"].tolist()
    assert first == ["verify_replicas=2", "verify_replicas=1", "verify_replicas=3"]
    chosen = log[log["chosen"]].set_index("time_s")["candidate"]
    # 3 replicas are nearly as good as 4 here (fixed runs: within 2 %), so the climb
    # stays around the best once there rather than on it.
    assert chosen[20.0] == "verify_replicas=4", chosen.to_dict()
    later = chosen[chosen.index >= 20]
    assert set(later) <= {"verify_replicas=3", "verify_replicas=4", "verify_replicas=5"}
    assert later.value_counts().idxmax() == "verify_replicas=4"


def test_fused_fraction_candidates_set_the_hybrid_share(tmp_path):
    """Over a slow link, distributed rounds miss the TPOT target and fused ones do not: the
    planner, started at a fused share of 0, moves to 1 and the later requests go fused."""
    _trace(tmp_path / "trace.csv", [(2.0, 40.0)])
    path = write_scenario(
        tmp_path,
        mode="hybrid",
        workload={"source": "trace://trace.csv", "format": "csv", "slo": SLO},
        clients=100,
        replicas=2,
        link={"src": "laptops", "dst": "pool", "rtt_ms": 400, "bw_mbps": 100},
        extra={
            "speculation.hybrid": {"policy": "fused_fraction", "params": {"fraction": 0.0}},
            "planner": {
                "enabled": True,
                "interval_s": 10,
                "window_s": 10,
                "model_load_s": 0,
                "candidates": {"fused_fraction": [0.0, 1.0]},
            },
        },
    )
    result = run(load_scenario(path))
    chosen = result.planner_log[result.planner_log["chosen"]].set_index("time_s")["candidate"]
    assert chosen[10.0] == "fused_fraction=1", chosen.to_dict()
    frame = result.requests
    assert (frame[frame["arrival_s"] < 10.0]["mode"] == "distributed").all()
    assert (frame[frame["arrival_s"] >= 10.0]["mode"] == "fused").all()


def test_each_round_logs_what_it_sampled_of_the_last_window(tmp_path):
    """The log's context columns: arrivals, completions, SLO attainment and acceptance.

    Arrivals are 6 per second of 100 + 50 tokens; the completions of the
    last window are counted from the run's own records.
    """
    result = run(_scenario(tmp_path, [(6, 40)], 2, _planner(10)))
    log = result.planner_log.drop_duplicates("time_s").set_index("time_s")
    assert (log["recent_arrival_rate_per_s"] == 6.0).all()
    assert (log["recent_prompt_tokens"] == 100.0).all()
    assert (log["recent_output_tokens"] == 50.0).all()
    requests = result.requests
    for at_s, row in log.iterrows():
        finish_s = requests["arrival_s"] + requests["e2e_ms"] / 1000.0
        done = requests[(requests["outcome"] == "completed") & (finish_s >= at_s - 10)]
        done = done[done["arrival_s"] < at_s]
        assert row["recent_completed"] == (finish_s[done.index] < at_s).sum()
        assert 0.0 <= row["recent_slo_attainment"] <= 1.0
        assert 0.0 < row["recent_acceptance"] < 1.0
