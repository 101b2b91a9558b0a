"""Energy, cost and GPU-hours of a planner's replicas: each counts exactly while it held its GPUs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator import load_scenario, run
from simulator.runner import Result, snapshot
from tests.engine_fixtures import PROFILES, synthetic, write_scenario

IDLE_W = 250.0
"""Idle power given to the test's replica profile (a test value, not a measurement)."""
SLO = {"ttft_ms": 2000, "tpot_ms": 200}
RATE_PER_S = 3
DURATION_S = 30
PLANNED_AT_S = 10.0
"""The planner's first round: at ``interval_s``."""


def _idle_profile(tmp_path: Path) -> tuple[Path, float]:
    """The A100 replica profile with an idle power; return it and its price per hour."""
    profile = yaml.safe_load((PROFILES / "a100-tp1.yaml").read_text())
    profile["energy"]["idle_power_w"] = IDLE_W
    profile["sources"]["energy.idle_power_w"] = "test value"
    path = tmp_path / "a100-tp1.yaml"
    path.write_text(yaml.safe_dump(profile), encoding="utf-8")
    return path, float(profile["cost"]["usd_per_hour"])


def _run(
    tmp_path: Path,
    replicas: int,
    planned: int | None,
    rate_per_s: int = RATE_PER_S,
    slo: dict[str, float] = SLO,
    slo_floor: float | None = None,
) -> tuple[Result, float]:
    """Evenly spaced arrivals; a planner (if ``planned``) sets ``planned`` replicas at 10 s.

    ``slo_floor``: the planner keeps the most goodput among the candidates meeting that SLO
    attainment (so a candidate below it, the current one included, gives way).
    """
    tmp_path.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{i / rate_per_s:.6f},100,50\n" for i in range(rate_per_s * DURATION_S))
    (tmp_path / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    planner: dict[str, Any] = {}
    if planned is not None:
        planner = {
            "enabled": True,
            "interval_s": PLANNED_AT_S,
            "window_s": 5,
            "model_load_s": 2.0,
            "candidates": {"verify_replicas": [planned]},
            "min_requests": 5,  # a 5 s window of 3 requests/s decides
        }
        if slo_floor is not None:
            planner["objectives"] = ["goodput_at_slo_floor"]
            planner["slo_floor"] = slo_floor
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload={"source": "trace://trace.csv", "format": "csv", "slo": slo},
        clients=50,
        replicas=replicas,
        extra={"planner": planner},
    )
    profile, usd_per_hour = _idle_profile(tmp_path)
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][1]["profile"] = str(profile)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return run(load_scenario(path)), usd_per_hour


def _pool(result: Result) -> tuple[dict[str, Any], dict[str, Any]]:
    summary = result.summary
    return (
        summary["energy"]["by_device_class"]["pool"],
        summary["cost"]["by_device_class"]["pool"],
    )


def test_added_replicas_cost_and_idle_for_exactly_the_time_they_existed(tmp_path):
    """Started on 2, the planner adds 2 at 10 s: they hold their GPUs (loading included)
    from 10 s to the end, so the pool's held time is 2 x end + 2 x (end - 10 s), and its
    idle energy, hourly cost and GPU-hours are exactly that share of 4 replicas' run."""
    # A tight TTFT at 6 requests/s: 2 replicas attain about 0.87, 4 about 0.94 (floor 0.9).
    result, usd_per_hour = _run(
        tmp_path,
        replicas=2,
        planned=4,
        rate_per_s=6,
        slo={"ttft_ms": 30, "tpot_ms": 200},
        slo_floor=0.9,
    )
    end_s = result.output.simulated_s
    assert end_s > 2 * PLANNED_AT_S
    expected_spans = ((0.0, end_s),) * 2 + ((PLANNED_AT_S, end_s),) * 2
    assert result.output.replica_spans_s == expected_spans
    held_s = 2 * end_s + 2 * (end_s - PLANNED_AT_S)
    energy, cost = _pool(result)
    assert energy["units"] == 2  # the scenario's count
    assert energy["idle_j"] == pytest.approx(IDLE_W * (held_s - energy["busy_s"]), rel=1e-12)
    assert cost["usd_hourly"] == pytest.approx(usd_per_hour * held_s / 3600.0, rel=1e-12)
    assert result.summary["resources"]["gpu_hours"] == pytest.approx(held_s / 3600.0, rel=1e-12)
    # More than the scenario's 2 replicas for the whole run, less than 4.
    assert 2 * end_s < held_s < 4 * end_s


def test_stopped_replicas_cost_and_idle_until_they_retired(tmp_path):
    """Started on 4, the planner keeps 2 from 10 s: the other 2 drain, retire, and count
    until then; idle energy, hourly cost and GPU-hours follow the same spans."""
    result, usd_per_hour = _run(tmp_path, replicas=4, planned=2)
    end_s = result.output.simulated_s
    spans = result.output.replica_spans_s
    assert spans[:2] == ((0.0, end_s),) * 2
    retired = [off for _, off in spans[2:]]
    assert all(PLANNED_AT_S <= off < end_s for off in retired)
    held_s = 2 * end_s + sum(retired)
    energy, cost = _pool(result)
    assert energy["idle_j"] == pytest.approx(IDLE_W * (held_s - energy["busy_s"]), rel=1e-12)
    assert cost["usd_hourly"] == pytest.approx(usd_per_hour * held_s / 3600.0, rel=1e-12)
    assert result.summary["resources"]["gpu_hours"] == pytest.approx(held_s / 3600.0, rel=1e-12)


def test_without_a_planner_every_replica_counts_for_the_whole_run(tmp_path):
    """No planner: the pool held its replicas for the whole run, priced as units x price x
    run hours, exactly as the formula without spans computes it."""
    result, usd_per_hour = _run(tmp_path, replicas=3, planned=None)
    end_s = result.output.simulated_s
    assert result.output.replica_spans_s == ()
    usage = {u.id: u for u in result.output.device_classes}["pool"]
    assert usage.held == ((3, end_s),)
    energy, cost = _pool(result)
    assert energy["idle_j"] == IDLE_W * (3 * end_s - energy["busy_s"])
    assert cost["usd_hourly"] == 3 * usd_per_hour * end_s / 3600.0


def test_a_pool_shrinking_while_a_replica_drains_drains_one_more(tmp_path: Path) -> None:
    """Three replicas busy; the planner leaves two, then one while the third still drains.

    The second change counted the replicas it needed to start back (one
    fewer than the serving ones: -1) and took ``draining[:-1]``: the replica
    it had just drained served again, so the pool kept two replicas (and
    paid for them) while the log said it changed to one.
    """
    path = write_scenario(tmp_path, mode="none", workload=synthetic(6, 1e5, 20, 200), replicas=3)
    engine = snapshot(load_scenario(path), 0.1).engine
    engine.set_replica_count("pool", 2, 0.5)
    engine.set_replica_count("pool", 1, 0.5)
    assert engine.serving_counts() == {"pool": 1}
    assert [r.state for r in engine.fleet.replicas] == ["serving", "draining", "draining"]
    engine.advance(100.0)
    assert all(r.outcome == "completed" for r in engine.output().records)
    assert [r.state for r in engine.fleet.replicas] == ["serving", "retired", "retired"]
