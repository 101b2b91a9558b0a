"""What-if windows: exact continuation of a stopped run, and candidate windows from its records."""

from __future__ import annotations

import math
from dataclasses import astuple

import pytest

from simulator import load_scenario, run
from simulator.engine.tracing import ListTracer
from simulator.runner import run_candidate, run_window, snapshot
from tests.engine_fixtures import synthetic, write_scenario

START_S = 2.0
END_S = 3.5


def _same(a: object, b: object) -> bool:
    """Equal, ``nan`` equal to ``nan``."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _scenario(tmp_path, mode, replicas=2, name="scenario.yaml"):
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=synthetic(200, 40, 300, 60),
        clients=5,
        replicas=replicas,
        name=name,
    )
    return load_scenario(path)


@pytest.mark.parametrize("mode", ["none", "distributed", "fused"])
def test_a_window_reproduces_the_full_run_exactly(tmp_path, mode):
    """Every request that ends within the window has its full-run record, field for field."""
    scenario = _scenario(tmp_path, mode)
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
    result = run_candidate(smaller, state, 60.0, tracer=tracer)
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
