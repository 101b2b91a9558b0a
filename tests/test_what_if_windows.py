"""What-if windows: exact continuation of a stopped run, and candidate windows from its records."""

from __future__ import annotations

import math
from dataclasses import astuple
from pathlib import Path

import pytest
import yaml

from simulator import load_scenario, run
from simulator.engine.tracing import ListTracer
from simulator.runner import run_candidate, run_window, snapshot
from tests.engine_fixtures import planner_every_second, synthetic, write_scenario
from tests.test_serving_discipline import _target_profile, _with_target_profile

START_S = 2.0
END_S = 3.5


def _same(a: object, b: object) -> bool:
    """Equal, ``nan`` equal to ``nan``."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _scenario(tmp_path, mode, replicas=2, name="scenario.yaml", noise="none"):
    extra: dict[str, object] = {"simulation.step_noise": noise}
    if mode == "hybrid":
        # The link's 20 ms RTT is under the threshold: the hybrid policy sends requests distributed.
        extra["speculation.hybrid"] = {
            "policy": "rtt_threshold",
            "params": {"threshold_ms": 30},
        }
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=synthetic(200, 40, 300, 60),
        clients=5,
        replicas=replicas,
        link={"src": "laptops", "dst": "pool", "rtt_ms": 20, "bw_mbps": 100},
        extra=extra,
        name=name,
    )
    return load_scenario(path)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "noise"),
    [
        ("none", "none"),
        ("distributed", "none"),
        ("fused", "none"),
        ("hybrid", "none"),
        ("none", "measured"),
        ("fused", "measured"),
    ],
)
def test_a_window_reproduces_the_full_run_exactly(tmp_path, mode, noise):
    """Every request that ends within the window has its full-run record, field for field
    (with step-time noise too: a copy continues each replica's draws)."""
    scenario = _scenario(tmp_path, mode, noise=noise)
    full = {r.request_id: r for r in run(scenario).output.records}
    state = snapshot(scenario, START_S)
    carried = {item.request_id for item in state.in_flight}
    window = run_window(state, END_S).output.records
    ended = [r for r in window if r.outcome != "unfinished"]
    in_window = [r for r in ended if r.request_id in carried]
    assert len(in_window) >= 5, "some requests in flight at the start should end in the window"
    for record in ended:
        expected = full[record.request_id]
        assert all(_same(a, b) for a, b in zip(astuple(record), astuple(expected), strict=True)), (
            record,
            expected,
        )
    # Requests still unfinished in the window are unfinished or end later in the full run.
    for record in window:
        if record.outcome == "unfinished":
            assert record.generated_tokens <= full[record.request_id].generated_tokens


def test_windows_at_several_times_reproduce_the_full_run(tmp_path):
    """One snapshot serves windows of several lengths, each exact."""
    scenario = _scenario(tmp_path, "distributed")
    full = {r.request_id: r for r in run(scenario).output.records}
    state = snapshot(scenario, 1.0)
    for end_s in (1.5, 2.5, 4.0):
        for record in run_window(state, end_s).output.records:
            if record.outcome != "unfinished":
                assert astuple(record) == astuple(full[record.request_id])


def test_a_window_cut_inside_a_fused_decode_run_reports_what_a_cut_run_reports(tmp_path):
    """Two requests decoding in one fused run at the window's end: their tokens so far count.

    Before, a window (like a run cut by ``until_s``) dropped the iterations of the fused
    decode run under way at its end: each request reported 1 generated token instead of 24.
    """
    path = write_scenario(tmp_path, mode="none", workload=synthetic(2, 1e6, 100, 200))
    scenario = load_scenario(path)
    cut = run(scenario, until_s=0.5).requests
    window = run_window(snapshot(scenario, 0.1), 0.5).requests
    assert list(window["generated_tokens"]) == list(cut["generated_tokens"]) == [24, 24]


def test_a_snapshot_is_not_consumed_by_its_windows(tmp_path):
    scenario = _scenario(tmp_path, "distributed")
    state = snapshot(scenario, START_S)
    before = state.in_flight
    one = run_window(state, END_S)
    two = run_window(state, END_S)
    assert state.in_flight == before
    assert state.engine.env.now == START_S
    assert one.summary == two.summary
    assert one.requests.equals(two.requests)


@pytest.mark.parametrize("mode", ["none", "distributed", "fused"])
def test_carried_requests_keep_their_real_ttft_and_tpot(tmp_path, mode):
    """A candidate window counts TTFT from the real arrival and TPOT from the real first token."""
    scenario = _scenario(tmp_path, mode)
    full = run(scenario).requests.set_index("request_id")
    state = snapshot(scenario, START_S)
    started = {i.request_id: i for i in state.in_flight if not math.isnan(i.first_token_s)}
    assert started
    frame = run_candidate(scenario, state, END_S + 2.0).requests.set_index("request_id")
    rows = frame.loc[sorted(started)]
    # Their first token was before the window: the same TTFT as in the full run.
    assert (rows["ttft_ms"] == full.loc[rows.index, "ttft_ms"]).all()
    assert (rows["arrival_s"] == full.loc[rows.index, "arrival_s"]).all()
    done = rows[rows["outcome"] == "completed"]
    assert len(done) >= 5
    # TPOT spans the tokens made before the window too: never from the window start.
    first = full.loc[done.index, "arrival_s"] + full.loc[done.index, "ttft_ms"] / 1000.0
    tokens = done["output_tokens"] - 1
    expected = (done["arrival_s"] + done["e2e_ms"] / 1000.0 - first) * 1000.0 / tokens
    assert (done["tpot_ms"] - expected).abs().max() < 1e-6
    assert (done["tpot_ms"] > 0).all()


@pytest.mark.parametrize("mode", ["none", "distributed", "fused"])
def test_a_candidate_with_fewer_replicas_migrates_by_recompute(tmp_path, mode):
    """Requests of a removed replica move to a remaining one and rebuild their context."""
    scenario = _scenario(tmp_path, mode)
    state = snapshot(scenario, START_S)
    removed = {i.request_id: i for i in state.in_flight if i.replica == 1}
    moved = {rid for rid, i in removed.items() if 0 < i.generated < i.output_tokens}
    assert moved
    smaller = _scenario(tmp_path, mode, replicas=1, name="smaller.yaml")
    tracer = ListTracer()
    result = run_candidate(smaller, state, 600.0, tracer=tracer)
    frame = result.requests.set_index("request_id")
    assert (frame["outcome"] == "completed").all()
    assert (frame["replica"] == 0).all()
    assert (frame["generated_tokens"] == frame["output_tokens"]).all()
    migrated = {int(s.split()[1]) for _, kind, s, _ in tracer.events if kind == "migrate"}
    assert migrated == moved
    # Each migrated request is queued for a prefill (its recompute) at the window start.
    queued = {
        int(s.split()[1])
        for t, kind, s, _ in tracer.events
        if kind == "prefill_queued" and t == START_S
    }
    assert moved <= queued
    # Tokens made before the window are kept.
    for rid in moved:
        assert frame.loc[rid, "generated_tokens"] == removed[rid].output_tokens


def test_a_closed_loop_window_reproduces_the_full_run(tmp_path):
    """Users' think times come from a random stream: the copy draws the same ones."""
    workload = synthetic(200, 1.0, 300, 60)
    del workload["synthetic"]["arrival"]
    workload["closed_loop"] = {"users": 8, "think_time_s": {"dist": "exponential", "mean_s": 0.2}}
    scenario = load_scenario(
        write_scenario(tmp_path, mode="distributed", workload=workload, clients=5, replicas=2)
    )
    full = {r.request_id: r for r in run(scenario).output.records}
    state = snapshot(scenario, START_S)
    arrived_at_start = len(state.engine.output().records)
    ended = [r for r in run_window(state, END_S + 2.0).output.records if r.outcome != "unfinished"]
    # The window ends more requests than had arrived at its start: users came back after thinking.
    assert len(ended) > arrived_at_start
    for record in ended:
        assert all(
            _same(a, b)
            for a, b in zip(astuple(record), astuple(full[record.request_id]), strict=True)
        )


SHORT = {"design_example": ["workload.duration_s=20"]}
"""Overrides keeping an example's full run short."""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["design_example", "hybrid_mix"])
def test_windows_of_the_shipped_examples_reproduce_their_full_runs(name):
    """Real profiles, several pools, both hybrid lanes and the example's policies."""
    path = Path(__file__).parents[1] / "scenarios" / "examples" / f"{name}.yaml"
    scenario = load_scenario(path, overrides=SHORT.get(name, []))
    full_run = run(scenario)
    full = {r.request_id: r for r in full_run.output.records}
    start_s = full_run.output.simulated_s / 3
    state = snapshot(scenario, start_s)
    carried = {item.request_id for item in state.in_flight}
    ended = [
        r for r in run_window(state, start_s + 20.0).output.records if r.outcome != "unfinished"
    ]
    assert any(r.request_id in carried for r in ended)
    for record in ended:
        assert all(
            _same(a, b)
            for a, b in zip(astuple(record), astuple(full[record.request_id]), strict=True)
        )


def test_requests_waiting_for_admission_are_offered_again_first(tmp_path):
    """Deferred requests at the start keep their arrival and go before the window's arrivals."""
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(120, 40, 300, 60),
        replicas=1,
        extra={"scheduler.admission_control": {"policy": "max_in_flight", "params": {"limit": 4}}},
    )
    scenario = load_scenario(path)
    state = snapshot(scenario, START_S)
    waiting = [i for i in state.in_flight if i.replica < 0]
    # The head of the queue was deferred; the ones behind it wait without being asked.
    assert waiting and waiting[0].deferred
    tracer = ListTracer()
    frame = run_candidate(scenario, state, 600.0, tracer=tracer).requests.set_index("request_id")
    assert (frame["outcome"] == "completed").all()
    rows = frame.loc[[i.request_id for i in waiting]]
    assert (rows["arrival_s"] < START_S).all()
    admitted = [int(s.split()[1]) for _, kind, s, _ in tracer.events if kind == "admit"]
    assert admitted[: len(waiting)] == [i.request_id for i in waiting]


def test_a_window_starts_preempted_requests_without_their_kv(tmp_path: Path) -> None:
    """A replica of 100 MB of KV, eight requests growing to 30 MB each, ``preempt_recompute``.

    At 0.5 s the replica holds 80 MB and four preempted requests wait to
    recompute. A window's start gave each of them its KV back, and every
    decoding request one token more than it held, so a candidate window of
    the same configuration raised "KV allocation beyond capacity", and so did
    a planner run's first round (the whole run stopped). Now the preempted
    requests recompute first, as in the run, and the others hold what they
    held.
    """
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(8, 1e5, 20, 40),
        extra={"scheduler.kv": {"on_full": "preempt_recompute"}},
    )
    limited = _target_profile(tmp_path, memory={"kv_cache_limit_mb": 100})
    scenario = load_scenario(_with_target_profile(path, limited))
    state = snapshot(scenario, 0.5)
    held = {req.request_id: req.kv_mb for req in state.engine.replicas[0].holders}
    assert sum(held.values()) == 80.0
    preempted = {i.request_id for i in state.in_flight if i.recompute}
    assert len(preempted) == 4 and not preempted & held.keys()
    assert all(i.generated > 0 for i in state.in_flight if i.recompute)
    result = run_candidate(scenario, state, 100.0)
    assert (result.requests["outcome"] == "completed").all()
    # The online planner windows the same state each round.
    document = yaml.safe_load(Path(path).read_text())
    document["workload"] = synthetic(40, 20, 20, 40)
    document["planner"] = planner_every_second({"verify_replicas": [1, 2]})
    Path(path).write_text(yaml.safe_dump(document, sort_keys=False))
    planned = run(load_scenario(path))
    assert (planned.requests["outcome"] == "completed").all()
    assert planned.requests["preemptions"].sum() > 0
