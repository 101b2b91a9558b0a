"""The planner's prefill:decode split of a disaggregated fleet (``prefill_replicas``, ``decode_replicas``)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from simulator import load_scenario, run
from simulator.engine.runtime import ReplicaPlan, build_runtime
from simulator.outputs import PLANNER_LOG, write_results
from simulator.planner.analytic_split import estimate_split
from simulator.planner.candidates import enumerate_candidates
from simulator.planner.online import OnlinePlanner, _started_gpus
from simulator.planner.windows import WindowTask
from simulator.runner import run_requests
from simulator.scenario.model import Scenario
from simulator.validate import validate_file
from tests.engine_fixtures import synthetic, write_scenario
from tests.test_disaggregated_windows import disaggregated

SLO = {"ttft_ms": 2000, "tpot_ms": 200}
OWN_PATHS = ("run.json", "scenario.resolved.yaml")
"""Files that name the run's folder or wall time."""
SPLIT = {"prefill_replicas": [1, 2, 3], "decode_replicas": [1, 2, 3]}


def _planner(candidates: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "enabled": True,
        "interval_s": 10,
        "window_s": 10,
        "model_load_s": 2.0,
        "objectives": ["goodput"],
        "candidates": candidates or SPLIT,
    }


def _scenario(
    tmp_path: Path, prefill: int, decode: int, planner: dict[str, Any] | None = None
) -> Scenario:
    """Decode-bound: 200-token outputs at 3 requests/s, a decode replica running at most 6.

    A prefill (100 tokens) takes about 11 ms, so one prefill replica serves
    some 90 requests/s; a decode iteration takes about 20 ms for the 6, so a
    decode replica serves some 1.4 requests/s: three are needed.
    """
    tmp_path.mkdir(parents=True, exist_ok=True)
    workload = synthetic(180, 3.0, 100, 200, slo=SLO)
    path = disaggregated(
        tmp_path,
        prefill=prefill,
        decode=decode,
        workload=workload,
        extra={"planner": planner or {}},
    )
    return load_scenario(path)


def test_the_split_candidates_are_the_declared_grid(tmp_path: Path) -> None:
    scenario = _scenario(
        tmp_path, 3, 1, _planner({"prefill_replicas": [1, 3], "decode_replicas": [2, 1, 3]})
    )
    planner = OnlinePlanner(scenario.planner, scenario.seed)
    assert [c.key for c in planner.candidates] == [
        f"prefill_replicas={p} decode_replicas={d}" for p in (1, 3) for d in (2, 1, 3)
    ]
    assert enumerate_candidates({"decode_replicas": [2], "prefill_replicas": [1]})[0].values == (
        ("prefill_replicas", 1.0),
        ("decode_replicas", 2.0),
    )
    log = run(scenario).planner_log
    first = log[log["time_s"] == log["time_s"].min()]
    # The current configuration (3, 1) is one of the grid: every candidate once, no other.
    assert list(first["candidate"]) == [c.key for c in planner.candidates]
    assert list(first[first["current"]]["candidate"]) == ["prefill_replicas=3 decode_replicas=1"]
    # Windows keeping every replica migrate nothing; those without prefill replicas 1 and 2
    # migrate what waits there for a decode replica (its KV held there).
    migrated = dict(zip(first["candidate"], first["migrated"], strict=True))
    assert migrated["prefill_replicas=3 decode_replicas=1"] == 0
    assert migrated["prefill_replicas=3 decode_replicas=3"] == 0
    assert migrated["prefill_replicas=1 decode_replicas=1"] > 0


def test_the_planner_moves_replicas_from_prefill_to_decode(tmp_path: Path) -> None:
    """Started on 3 prefill + 1 decode replicas, it chooses 1 + 3 and serves far more requests well."""
    fixed = run(_scenario(tmp_path / "fixed", 3, 1))
    result = run(_scenario(tmp_path / "planned", 3, 1, _planner()))
    log = result.planner_log
    chosen = log[log["chosen"]]
    assert chosen.iloc[0]["candidate"] == "prefill_replicas=1 decode_replicas=3"
    assert chosen.iloc[0]["decision"] == "changed"
    planned = result.summary["goodput"]["requests_per_gpu_s"]
    assert planned > 5 * fixed.summary["goodput"]["requests_per_gpu_s"]
    # Two prefill replicas drained and retired, two decode replicas started (loading first).
    roles = result.summary["disaggregation"]["by_role"]
    assert roles["prefill"]["replicas"] == 3 and roles["decode"]["replicas"] >= 3
    output = result.output
    spans = output.replica_spans_s
    assert all(spans[i][1] < output.simulated_s for i in (1, 2))
    assert all(spans[i][0] == 10.0 for i in (4, 5))
    assert output.disaggregation is not None
    started = {t.decode_replica for t in output.disaggregation.transfers}
    assert {4, 5} <= started
    # Every replica's held time is paid for: more decode GPU-hours than the fixed split's.
    assert (
        roles["decode"]["gpu_hours"]
        > fixed.summary["disaggregation"]["by_role"]["decode"]["gpu_hours"]
    )


def test_hill_climbing_walks_the_split_one_replica_at_a_time(tmp_path: Path) -> None:
    """From 2P2D each change moves one key one step: first a prefill replica less, later a
    decode replica more."""
    log = run(_scenario(tmp_path, 2, 2, {**_planner(), "search": "hill_climb"})).planner_log
    chosen = log[log["chosen"]]
    steps = [(2, 2)]
    for key in chosen["candidate"]:
        values = dict(part.split("=") for part in str(key).split())
        steps.append((int(values["prefill_replicas"]), int(values["decode_replicas"])))
    for (p0, d0), (p1, d1) in itertools.pairwise(steps):
        assert abs(p1 - p0) + abs(d1 - d0) <= 1
    assert steps[1] == (1, 2)
    assert (1, 3) in steps


def test_a_re_split_is_charged_for_the_replicas_it_starts(tmp_path: Path) -> None:
    """3P1D to 1P3D holds as many GPUs, but starts two decode replicas: their loading is a cost."""
    runtime = build_runtime(_scenario(tmp_path, 1, 1))
    pools = {plan.pool: plan for plan in runtime.replicas}
    p, d = pools["pool"], pools["dpool"]
    recent = run_requests(_scenario(tmp_path, 1, 1)).window(0.0, 1.0, rebase=False)

    def task(*plans: ReplicaPlan) -> WindowTask:
        return WindowTask(-1, replace(runtime, replicas=plans), recent, (), 0, 0.0, 1.0)

    assert _started_gpus(task(p, d, d, d), task(p, p, p, d)) == 2
    assert _started_gpus(task(p, p, p, d), task(p, d, d, d)) == 2
    assert _started_gpus(task(p, d), task(p, p, p, d)) == 0


def test_the_analytic_estimate_sees_the_decode_bottleneck(tmp_path: Path) -> None:
    """Per candidate split, the estimate prices prefill and decode replicas apart."""
    scenario = _scenario(tmp_path, 1, 3)
    runtime = build_runtime(scenario)
    recent = run_requests(scenario).window(0.0, 10.0, rebase=False)
    pools = {plan.pool: plan for plan in runtime.replicas}
    estimates = {}
    for prefill in (1, 2, 3):
        for decode in (1, 2, 3):
            plans = (pools["pool"],) * prefill + (pools["dpool"],) * decode
            split = replace(runtime, replicas=plans)
            estimates[(prefill, decode)] = estimate_split(split, recent, 10.0, 0.0)
    best = min(estimates, key=lambda key: estimates[key].rank())
    assert best == (1, 3)
    # One or two decode replicas cannot decode 3 requests/s of 200 tokens: nothing is good.
    assert all(estimates[(p, d)].goodput == 0.0 for p in (1, 2, 3) for d in (1, 2))
    assert estimates[(1, 1)].worst_ratio > estimates[(1, 2)].worst_ratio > 1.0
    # More prefill replicas only add GPUs.
    assert estimates[(1, 3)].goodput > estimates[(2, 3)].goodput > estimates[(3, 3)].goodput


def test_the_analytic_pre_filter_keeps_the_split_the_windows_choose(tmp_path: Path) -> None:
    planner = {**_planner(), "analytic_keep": 2}
    log = run(_scenario(tmp_path, 3, 1, planner)).planner_log
    first = log[log["time_s"] == 10.0]
    assert first["windowed"].sum() == 3  # the two it ranks best and the current configuration
    chosen = first[first["chosen"]]
    assert list(chosen["candidate"]) == ["prefill_replicas=1 decode_replicas=3"]
    assert list(chosen["windowed"]) == [True]


def test_the_same_seed_repeats_the_planned_run_byte_for_byte(tmp_path: Path) -> None:
    """Two runs in two folders write identical results (but the files naming their folder)."""
    files = []
    for sub in ("a", "b"):
        result = run(_scenario(tmp_path / sub, 3, 1, _planner()))
        paths = write_results(result, tmp_path / sub / "out")
        files.append({p.name: p.read_bytes() for p in paths if p.name not in OWN_PATHS})
    assert PLANNER_LOG in files[0]
    differ = [name for name in files[0] if files[0][name] != files[1].get(name)]
    assert differ == [] and set(files[0]) == set(files[1])


def _issues(path: Path) -> list[str]:
    verdict = validate_file(path)
    assert verdict.error is not None
    return [issue.format() for issue in verdict.error.issues]


@pytest.mark.parametrize(
    ("planner", "key", "allowed"),
    [
        (
            _planner({"tensor_parallel": [1]}),
            "planner.candidates.tensor_parallel",
            "prefill_replicas and decode_replicas with prefill and decode pools",
        ),
        (
            _planner({"prefill_replicas": [1, 5000]}),
            "planner.candidates",
            "at most 4,096 target replicas",
        ),
    ],
)
def test_what_a_disaggregated_planner_cannot_do_is_refused(
    tmp_path: Path, planner: dict[str, Any], key: str, allowed: str
) -> None:
    path = disaggregated(tmp_path, extra={"planner": planner})
    lines = _issues(path)
    assert any(key in line and allowed in line for line in lines), "\n".join(lines)


def test_split_candidates_need_prefill_and_decode_pools(tmp_path: Path) -> None:
    path = write_scenario(
        tmp_path, mode="none", workload=synthetic(10, 1.0, 100, 10), extra={"planner": _planner()}
    )
    lines = _issues(path)
    for key in ("prefill_replicas", "decode_replicas"):
        assert any(
            f"planner.candidates.{key}" in line and "the key left out unless" in line
            for line in lines
        ), "\n".join(lines)


def test_a_disaggregated_planner_may_tune_batching_alone(tmp_path: Path) -> None:
    path = disaggregated(tmp_path, extra={"planner": _planner({"max_batch": [8, 16]})})
    assert validate_file(path).error is None
