"""The planner's decisions: hysteresis, the change's cost, SLO floors, dimensionally right
penalties (on window scores), and the rounds of runs that keep or change."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from simulator import run
from simulator.planner.decision import decide, gain
from simulator.planner.objectives import WindowScore, jain_index
from simulator.scenario.model import Penalties, PlannerSpec
from simulator.validate import validate_file
from tests.engine_fixtures import write_scenario
from tests.test_planner import SLO, _planner, _scenario


def _score(good: int, gpu_s: float, **kw: Any) -> WindowScore:
    """A window of ``good`` good requests over ``gpu_s`` GPU-seconds (8 GPUs, 10 s by default)."""
    base: dict[str, Any] = {
        "p95_tpot": 50.0,
        "p95_ttft": 100.0,
        "p95_tvt": math.nan,
        "energy": 0.0,
        "cost": 0.0,
        "completed": good,
        "requests": good,
        "gpus": 8,
        "span_s": 10.0,
    }
    base.update(kw)
    return WindowScore(goodput=good / gpu_s, good=good, gpu_s=gpu_s, **base)


def _spec(**kw: Any) -> PlannerSpec:
    return replace(
        PlannerSpec(True, 10.0, 10.0, ("goodput", "p95_tpot"), {"verify_replicas": (1, 2)}), **kw
    )


def test_a_change_must_beat_the_current_configuration_by_the_hysteresis():
    current = _score(100, 100.0)
    small = _score(103, 100.0)
    large = _score(112, 100.0)
    spec = _spec()
    assert spec.hysteresis == 0.05
    kept = decide(spec, small, current, 0)
    assert not kept.change
    assert kept.reason == "gain 3.0 % in goodput not above hysteresis 5 %"
    changed = decide(spec, large, current, 0)
    assert changed.change
    assert changed.reason == "best by goodput +12.0 %"
    # the key is configuration: with no margin the small gain is a reason to change
    assert decide(_spec(hysteresis=0.0), small, current, 0).change


def test_a_better_tie_breaker_alone_is_no_reason_to_change():
    """Equal goodput (0 on both, as on windows no request meets its SLOs): a lower p95 TPOT
    ranks first, but the gain in goodput is 0, so the round keeps the configuration."""
    current = _score(0, 100.0, p95_tpot=400.0)
    faster = _score(0, 300.0, p95_tpot=300.0)
    spec = _spec(hysteresis=0.0)
    assert faster.rank(spec.objectives) < current.rank(spec.objectives)
    assert not decide(spec, faster, current, 16).change


def test_loading_the_window_does_not_see_is_charged_to_the_change():
    """A 10 s window of a candidate adding 8 GPUs that load for 60 s: the 50 s after the
    window, 400 GPU-s, are added to its GPU-seconds, and its 20 % gain no longer pays."""
    current = _score(100, 100.0)
    bigger = _score(240, 200.0)
    assert decide(_spec(model_load_s=0.0), bigger, current, 8).change
    assert decide(_spec(model_load_s=10.0), bigger, current, 8).change
    slow = decide(_spec(model_load_s=60.0), bigger, current, 8)
    assert not slow.change
    assert "400 GPU-s of loading after the window" in slow.reason
    assert gain(_spec(), _score(240, 600.0), current)[0] < 0


def test_windows_below_the_slo_floor_rank_after_every_one_meeting_it():
    spec = _spec(objectives=("goodput_at_slo_floor",), slo_floor=0.9)
    meets_low = _score(90, 300.0, requests=100)  # attainment 0.9, goodput 0.3
    misses_high = _score(80, 100.0, requests=100)  # attainment 0.8, goodput 0.8
    misses_low = _score(50, 50.0, requests=100)  # attainment 0.5, goodput 1.0
    ranked = sorted(
        [misses_low, misses_high, meets_low], key=lambda s: s.rank(spec.objectives, None, 0.9)
    )
    assert ranked == [meets_low, misses_high, misses_low]
    # without the floor, goodput alone
    plain = sorted([misses_low, misses_high, meets_low], key=lambda s: s.rank(("goodput",)))
    assert plain == [misses_low, misses_high, meets_low]
    assert decide(spec, meets_low, misses_high, 0).reason == "best by SLO floor met"


def test_fewest_gpus_meeting_the_floor():
    spec = _spec(objectives=("gpus_at_slo_floor", "p95_tpot"), slo_floor=0.9)
    small = _score(95, 80.0, requests=100, gpus=8)
    large = _score(99, 160.0, requests=100, gpus=16)
    too_small = _score(60, 40.0, requests=100, gpus=4)
    ranked = sorted([large, too_small, small], key=lambda s: s.rank(spec.objectives, None, 0.9))
    assert ranked == [small, large, too_small]
    decision = decide(spec, small, large, -8)
    assert decision.change and decision.reason == "best by GPUs +50.0 %"


def test_an_energy_penalty_reverses_a_ranking_toward_the_frugal_window():
    """Equal GPU-seconds: 100 good requests for 100 kJ against 90 for 10 kJ. Unpenalised the
    first ranks first; at one request per kJ the second does (100 - 100 < 90 - 10)."""
    hungry = _score(100, 100.0, energy=100_000.0)
    frugal = _score(90, 100.0, energy=10_000.0)
    assert hungry.rank(("goodput",)) < frugal.rank(("goodput",))
    penalties = Penalties(energy_per_kj=1.0)
    assert frugal.rank(("goodput",), penalties) < hungry.rank(("goodput",), penalties)
    assert frugal.penalised_goodput(penalties) == pytest.approx(0.8)


def test_a_fairness_penalty_reverses_a_ranking_toward_the_even_window():
    """Equal GPU-seconds: 100 good requests, all of one of two classes (Jain 0.5), against
    80 spread evenly (Jain 1). Unpenalised the first ranks first; at weight 0.5 its goodput
    is worth 0.75 of itself and the even window ranks first."""
    uneven = _score(100, 100.0, jain=(("origin", 0.5), ("slo_class", 1.0)))
    even = _score(80, 100.0, jain=(("origin", 1.0), ("slo_class", 1.0)))
    assert uneven.rank(("goodput",)) < even.rank(("goodput",))
    penalties = Penalties(fairness_weight=0.5)
    assert even.rank(("goodput",), penalties) < uneven.rank(("goodput",), penalties)
    assert uneven.penalised_goodput(penalties) == pytest.approx(0.75)
    by_class = Penalties(fairness_weight=0.5, fairness_over="slo_class")
    assert uneven.rank(("goodput",), by_class) < even.rank(("goodput",), by_class)


def test_jain_index():
    assert jain_index([1.0, 1.0, 1.0]) == 1.0
    assert jain_index([1.0, 0.0]) == 0.5
    assert jain_index([0.0, 0.0]) == 1.0
    assert jain_index([]) == 1.0
    assert jain_index([0.9, 0.3]) == pytest.approx(1.2**2 / (2 * 0.9))


@pytest.mark.parametrize("good", [0, 5, 50])
@pytest.mark.parametrize("energy_per_kj", [0.5, 5.0])
def test_idle_gpus_never_raise_a_penalised_score(good, energy_per_kj):
    """Adding GPUs that only draw idle power (more kJ, more GPU-seconds, no more good
    requests) never raises the penalised goodput, even where energy outweighs the requests."""
    penalties = Penalties(energy_per_kj=energy_per_kj, fairness_weight=0.5)
    base = _score(good, 80.0, energy=40_000.0, jain=(("origin", 0.7),))
    previous = base.penalised_goodput(penalties)
    for idle in (8, 16, 64):
        extra_s = idle * base.span_s
        padded = replace(base, gpu_s=base.gpu_s + extra_s, energy=base.energy + 300.0 * extra_s)
        score = padded.penalised_goodput(penalties)
        assert score <= previous
        previous = score


def test_rounds_with_few_requests_may_shrink_never_grow(tmp_path: Path):
    """6 requests/s for 10 s, then one every 20 s: the first round changes (2 -> 4); once the
    window holds fewer than min_requests requests it weighs only candidates with no more GPUs
    (it returns to 2 and never grows), and an empty window keeps, running no window."""
    phases = [(6.0, 10.0), (0.05, 40.0)]
    result = run(_scenario(tmp_path, phases, 2, {**_planner(10), "interval_s": 5}))
    log = result.planner_log
    rounds = log.drop_duplicates("time_s").set_index("time_s")
    assert rounds.loc[5.0, "decision"] == "changed"
    assert rounds.loc[5.0, "reason"].startswith("best by goodput +")
    late = rounds[rounds.index >= 20.0]
    assert len(late) >= 2
    few = late[late["reason"].str.startswith("1 request in the window, fewer than 20")]
    assert len(few) >= 1
    empty = late[late["reason"] == "empty window"]
    assert (empty["decision"] == "kept").all()
    assert log[log["reason"] == "empty window"]["est_goodput"].isna().all()
    windowed = log[log["reason"].str.startswith("1 request") & log["est_goodput"].notna()]
    assert set(windowed["candidate"]) <= {"verify_replicas=2", "verify_replicas=4"}
    chosen = log[log["chosen"]].set_index("time_s")["candidate"]
    assert chosen[chosen.index >= 20.0].iloc[-1] == "verify_replicas=2"
    # each round names the current configuration once and leaves one in place
    assert log.groupby("time_s")["current"].sum().eq(1).all()
    assert log.groupby("time_s")["chosen"].sum().eq(1).all()
    kept = log[log["decision"] == "kept"]
    assert (kept["chosen"] == kept["current"]).all()


def test_min_requests_and_hysteresis_are_honoured(tmp_path: Path):
    """At 3 requests/s on 8 replicas the planner drops to 2 at once (goodput about 4 times
    the current), even below min_requests (a shrink); a margin of 10 (1,000 %) keeps 8
    throughout. At 6 requests/s on 2 replicas it grows, unless min_requests is above the
    window's requests."""
    changed = run(_scenario(tmp_path / "d", [(3, 30)], 8, _planner(10))).planner_log
    assert changed[changed["chosen"]]["candidate"].iloc[0] == "verify_replicas=2"
    few = run(_scenario(tmp_path / "m", [(3, 30)], 8, {**_planner(10), "min_requests": 10_000}))
    assert few.planner_log[few.planner_log["chosen"]]["candidate"].iloc[0] == "verify_replicas=2"
    planner = {**_planner(10), "hysteresis": 10.0}
    log = run(_scenario(tmp_path / "h", [(3, 30)], 8, planner)).planner_log
    assert (log["decision"] == "kept").all(), log["reason"].unique()
    assert set(log[log["chosen"]]["candidate"]) == {"verify_replicas=8"}
    grows = run(_scenario(tmp_path / "g", [(6, 30)], 2, _planner(10))).planner_log
    assert grows[grows["chosen"]]["candidate"].iloc[0] != "verify_replicas=2"
    planner = {**_planner(10), "min_requests": 10_000}
    held = run(_scenario(tmp_path / "gm", [(6, 30)], 2, planner)).planner_log
    assert set(held[held["chosen"]]["candidate"]) == {"verify_replicas=2"}
    assert held["reason"].str.contains("no candidate with more GPUs").all()


def test_the_slo_floor_decides_how_few_gpus_the_planner_keeps(tmp_path: Path):
    """gpus_at_slo_floor at 6 requests/s on 2 replicas: with floor 0 every window meets it and
    2 (the fewest GPUs) is kept; with floor 0.9 no window of 2 meets it and the first round
    moves to the candidate of the highest attainment."""
    objectives = ["gpus_at_slo_floor", "p95_tpot"]
    chosen = {}
    for floor in (0.0, 0.9):
        planner = {**_planner(10), "objectives": objectives, "slo_floor": floor}
        log = run(_scenario(tmp_path / str(floor), [(6, 20)], 2, planner)).planner_log
        first = log[log["time_s"] == 10.0]
        chosen[floor] = first[first["chosen"]]["candidate"].item()
        assert "est_gpus_at_slo_floor" in log.columns
    assert chosen[0.0] == "verify_replicas=2"
    assert chosen[0.9] != "verify_replicas=2"


@pytest.mark.parametrize(
    ("planner", "key", "value"),
    [
        ({"slo_floor": 0.9}, "planner.slo_floor", "0.9"),
        ({"objectives": ["goodput", "gpus_at_slo_floor"]}, "planner.objectives", "gpus_at"),
        ({"hysteresis": 0.1, "enabled": False}, "planner", "hysteresis"),
        (
            {"penalties": {"fairness_over": "slo_class"}},
            "planner.penalties.fairness_over",
            "slo_class",
        ),
    ],
)
def test_floor_and_decision_keys_are_refused_where_nothing_uses_them(
    tmp_path: Path, planner: dict[str, Any], key: str, value: str
):
    """An SLO floor with no floor objective first, a floor objective not first, and the
    decision keys without a planner are refused, naming the file, the key and the value."""
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload={"source": "trace://trace.csv", "format": "csv", "slo": SLO},
        extra={"planner": {**_planner(10), **planner}},
    )
    (tmp_path / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,50\n")
    verdict = validate_file(path)
    assert verdict.error is not None
    lines = [issue.format() for issue in verdict.error.issues]
    assert any(path.name in line and key in line and value in line for line in lines), lines


def test_the_schema_lists_every_objective():
    from simulator.planner.objectives import OBJECTIVES
    from simulator.scenario.sections.context import SCHEMA

    planner = SCHEMA["properties"]["planner"]["properties"]
    assert tuple(planner["objectives"]["items"]["enum"]) == OBJECTIVES


def test_penalty_keys_reach_the_planner(tmp_path: Path):
    planner = {**_planner(10), "penalties": {"fairness_weight": 0.3, "fairness_over": "slo_class"}}
    spec = _scenario(tmp_path, [(6, 10)], 2, {**planner, "hysteresis": 0.1}).planner
    assert spec.penalties == Penalties(0.0, 0.3, "slo_class")
    assert spec.hysteresis == 0.1 and spec.min_requests == 20 and spec.slo_floor == 0.0


@pytest.mark.slow
def test_a_rate_step_is_followed_without_churn_and_beats_fixed_counts(tmp_path: Path):
    """6 requests/s for 60 s, then 12, started on 4 (the best for 6): the planner keeps 4
    until the step, scales up at the first round that sees it, changes at most twice after,
    and realises more good requests per GPU-second than fixed 4 or fixed 8 (every round
    runs its windows: ``replan_drift: 0``)."""
    phases = [(6.0, 60.0), (12.0, 60.0)]
    fixed = {n: _goodput_of(run(_scenario(tmp_path / f"f{n}", phases, n))) for n in (4, 8)}
    planner = {**_planner(20), "candidates": {"verify_replicas": [2, 4, 6, 8]}, "replan_drift": 0}
    result = run(_scenario(tmp_path / "p", phases, 4, planner))
    rounds = result.planner_log.drop_duplicates("time_s").set_index("time_s")
    assert (rounds.loc[:60.0, "decision"] == "kept").all()
    assert rounds.loc[70.0, "decision"] == "changed"
    assert (rounds.loc[70.0:, "decision"] == "changed").sum() <= 2
    assert _goodput_of(result) > max(fixed.values()), (_goodput_of(result), fixed)


def _goodput_of(result: Any) -> float:
    value = result.summary["goodput"]["requests_per_gpu_s"]
    assert value is not None
    return float(value)
