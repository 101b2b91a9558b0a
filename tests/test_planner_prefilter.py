"""The planner's analytic pre-filter and where its what-if windows run."""

from __future__ import annotations

import math

import pytest

from simulator import load_scenario, run
from simulator.engine.runtime import build_runtime
from simulator.errors import InputError
from simulator.planner.analytic import estimate
from simulator.planner.windows import PooledWindows, SerialWindows, window_runner
from simulator.workload import DEFAULT_CLASS, RequestTable, SloTargets
from tests.test_planner import SLO, _planner, _scenario

ALPHA = 0.7
K = 4
TOKENS_PER_ROUND = (1 - ALPHA ** (K + 1)) / (1 - ALPHA)
"""Leviathan et al.'s expected tokens per verify for i.i.d. acceptance (the fixtures' curve)."""


def _recent(rate_per_s: float, seconds: float) -> RequestTable:
    count = int(rate_per_s * seconds)
    return RequestTable.from_columns(
        [i / rate_per_s for i in range(count)],
        [100] * count,
        [50] * count,
        slos={DEFAULT_CLASS: SloTargets(**SLO)},
        origin=["laptops"] * count,
    )


def test_the_estimate_is_the_verify_utilisation_of_the_hand_computed_load(tmp_path):
    """Verify costs 30 ms per request of the batch, so a replica is busy 30 ms per round.

    At 6 requests/s of 50 tokens over n replicas, utilisation is
    6/n * 50/E * 0.03 (plus prefills): above 1 on 2 replicas, below on 4
    and 8. The estimate meets the SLOs on 4 and 8 only and ranks 4 first
    (the same requests on fewer GPUs).
    """
    recent = _recent(6.0, 10.0)
    estimates = {}
    for n in (2, 4, 8):
        runtime = build_runtime(_scenario(tmp_path / f"s{n}", [(6, 10)], n))
        estimates[n] = estimate(runtime, recent, 10.0, 0.0)
    verify_rho = {n: 6.0 / n * 50 / TOKENS_PER_ROUND * 0.030 for n in (2, 4, 8)}
    assert verify_rho[2] > 1 > verify_rho[4]
    assert estimates[2].goodput == 0.0
    assert estimates[2].worst_ratio >= verify_rho[2]
    assert estimates[4].goodput == pytest.approx(6.0 / 4)
    assert estimates[8].goodput == pytest.approx(6.0 / 8)
    assert min(estimates, key=lambda n: estimates[n].rank()) == 4


@pytest.mark.slow
def test_analytic_keep_windows_only_the_best_estimates_and_still_finds_the_known_best(tmp_path):
    """With analytic_keep 2 of 3 candidates, two get a window each round and 4 is chosen.

    (``replan_drift: 0``: every round runs its windows.)

    The current configuration gets one too: the first round (on 2, which the
    estimate ranks last) windows three.
    """
    planner = {**_planner(20), "analytic_keep": 2, "replan_drift": 0}
    result = run(_scenario(tmp_path, [(6, 60)], 2, planner))
    log = result.planner_log
    assert {"analytic_goodput", "windowed"} <= set(log.columns)
    per_round = log.groupby("time_s")["windowed"].sum()
    assert per_round[10.0] == 3
    assert (per_round.drop(10.0) == 2).all()
    assert log[~log["windowed"]]["est_goodput"].isna().all()
    chosen = log[log["chosen"]]
    assert chosen["windowed"].all()
    assert set(chosen["candidate"]) == {"verify_replicas=4"}
    skipped = set(log[~log["windowed"]]["candidate"])
    assert skipped == {"verify_replicas=2"}  # overloaded by the estimate


def test_without_analytic_keep_the_log_has_no_prefilter_columns(tmp_path):
    result = run(_scenario(tmp_path, [(6, 30)], 2, _planner(10)))
    assert "windowed" not in result.planner_log.columns
    assert "analytic_goodput" not in result.planner_log.columns


@pytest.mark.slow
def test_windows_on_a_process_pool_decide_exactly_as_in_process(tmp_path):
    """Scores come back in candidate order, so the log and the run do not depend on the pool."""
    scenario = _scenario(tmp_path, [(3, 30), (6, 30)], 2, _planner(10))
    serial = run(scenario, windows=SerialWindows())
    pooled_runner = PooledWindows("local", 2)
    try:
        pooled = run(scenario, windows=pooled_runner)
    finally:
        pooled_runner.close()
    assert serial.planner_log.equals(pooled.planner_log)
    assert serial.summary == pooled.summary


@pytest.mark.slow
def test_windows_on_ray_decide_exactly_as_in_process(tmp_path):
    pytest.importorskip("ray")
    scenario = _scenario(tmp_path, [(6, 20)], 2, _planner(10))
    serial = run(scenario)
    ray_runner = PooledWindows("ray", 2)
    try:
        on_ray = run(scenario, windows=ray_runner)
    finally:
        ray_runner.close()
    assert serial.planner_log.equals(on_ray.planner_log)


def test_window_runner_checks_its_options():
    assert isinstance(window_runner("local", 1, None), SerialWindows)
    assert isinstance(window_runner("local", 2, None), PooledWindows)
    with pytest.raises(InputError, match="--executor"):
        window_runner("threads", 2, None)
    with pytest.raises(InputError, match="--workers"):
        window_runner("local", 0, None)


@pytest.mark.slow
def test_cli_workers_do_not_change_the_planner_log(tmp_path):
    from simulator.cli import main

    scenario = _scenario(tmp_path, [(6, 30)], 2, _planner(10))
    logs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}"
        code = main(["run", str(scenario.source_file), "-q", "-o", str(out), "--workers", workers])
        assert code == 0
        logs.append((out / "planner_log.csv").read_text())
    assert logs[0] == logs[1]


def test_analytic_keep_with_a_hybrid_policy_without_a_fixed_share_is_refused(tmp_path):
    from tests.engine_fixtures import write_scenario

    (tmp_path / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,50\n")
    path = write_scenario(
        tmp_path,
        mode="hybrid",
        workload={"source": "trace://trace.csv", "format": "csv", "slo": SLO},
        extra={
            "speculation.hybrid": {"policy": "rtt_threshold", "params": {"threshold_ms": 50}},
            "planner": {**_planner(10), "analytic_keep": 1},
        },
    )
    with pytest.raises(InputError) as error:
        load_scenario(path)
    text = str(error.value)
    assert "planner.analytic_keep" in text and "fused_fraction" in text


def test_the_estimate_of_an_empty_window_is_nothing(tmp_path):
    runtime = build_runtime(_scenario(tmp_path, [(6, 10)], 2))
    empty = estimate(runtime, _recent(1.0, 0.0), 10.0, 0.0)
    assert empty.goodput == 0.0 and math.isinf(empty.worst_ratio)


@pytest.mark.slow
def test_the_choice_follows_the_energy_penalised_goodput(tmp_path):
    """With an energy penalty every round applies the candidate of the best penalised estimate."""
    planner = {
        **_planner(20),
        "penalties": {"energy_per_kj": 1.0},
        "candidates": {"verify_replicas": [2, 4, 8]},
        "replan_drift": 0,
    }
    log = run(_scenario(tmp_path, [(6, 60)], 2, planner)).planner_log
    assert log["est_penalised_goodput"].notna().all()
    assert (log["est_penalised_goodput"] < log["est_goodput"]).all()
    for _, rows in log.groupby("time_s"):
        best = rows.loc[rows["est_penalised_goodput"].idxmax()]
        assert bool(best["chosen"])


def test_penalised_goodput_charges_energy_at_its_rate_and_can_reverse_a_ranking():
    from simulator.planner.objectives import WindowScore
    from simulator.scenario.model import Penalties

    score = WindowScore(
        goodput=10 / 100,
        p95_tpot=1.0,
        p95_ttft=1.0,
        p95_tvt=1.0,
        energy=4000.0,
        cost=0.5,
        good=10,
        completed=12,
        gpu_s=100.0,
    )
    assert score.penalised_goodput(Penalties()) == pytest.approx(0.1)
    assert score.penalised_goodput(Penalties(energy_per_kj=1.0)) == pytest.approx((10 - 4) / 100)
    cheap = WindowScore(0.08, 1.0, 1.0, 1.0, 0.0, 0.0, 8, 8, 100.0)
    objectives = ("goodput",)
    assert score.rank(objectives) < cheap.rank(objectives)
    assert cheap.rank(objectives, Penalties(energy_per_kj=1.0)) < score.rank(
        objectives, Penalties(energy_per_kj=1.0)
    )


def test_cli_refuses_an_unknown_window_executor(tmp_path, capsys):
    from simulator.cli import main

    scenario = _scenario(tmp_path, [(6, 10)], 2, _planner(10))
    out = tmp_path / "out"
    code = main(["run", str(scenario.source_file), "-q", "-o", str(out), "--executor", "threads"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--executor" in err and "threads" in err and "local or ray" in err
    assert "Traceback" not in err
    assert not out.exists()
