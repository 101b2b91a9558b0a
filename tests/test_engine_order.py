"""Same-instant order and batch formation, checked on event-order logs.

The engine's rule: everything delivered at an instant (request arrivals,
prompts, bundles and results reaching the far end of a link) is in place
before any replica decides its next iteration at that instant, and a busy
replica takes in every bundle that arrived during its iteration when the
iteration ends.
"""

from __future__ import annotations

import pytest
import simpy
import yaml

from simulator import load_scenario, run
from simulator.engine.clock import DECISION, DELIVERY, call_at
from simulator.engine.tracing import ListTracer
from tests.engine_fixtures import PROFILES, write_scenario


def test_deliveries_of_an_instant_come_before_its_decisions():
    env = simpy.Environment()
    log: list[tuple[float, str]] = []
    call_at(env, 1.0, lambda: log.append((env.now, "decide")), DECISION)
    call_at(env, 1.0, lambda: log.append((env.now, "deliver a")), DELIVERY)
    call_at(env, 0.5, lambda: log.append((env.now, "earlier")), DECISION)
    call_at(env, 1.0, lambda: log.append((env.now, "deliver b")))
    env.run()
    assert log == [(0.5, "earlier"), (1.0, "deliver a"), (1.0, "deliver b"), (1.0, "decide")]


def test_actions_due_at_one_instant_run_at_it_in_the_order_they_were_scheduled():
    """Two deliveries for one time, scheduled from different times, stay one instant.

    Before, an action was scheduled ``time_s - now`` after now, and ``now + (time_s -
    now)`` is not always ``time_s`` in floating point: the one scheduled first (from
    0.0426... s) ran 1.4e-17 s late, after the one scheduled second (from 0.1 s).
    Transfers that arrived together (a link delivering in order under jitter) so
    reached the replica in a rounding-dependent order: a device's requests could be
    prefilled out of the device's order and wait on each other for ever.
    """
    env = simpy.Environment()
    due_s = 0.1056135786477838
    first_s = 0.04260906796881502
    assert first_s + (due_s - first_s) != due_s  # the rounding at stake
    log: list[tuple[float, str]] = []
    env.run(until=first_s)
    call_at(env, due_s, lambda: log.append((env.now, "first")))
    env.run(until=0.1)
    call_at(env, due_s, lambda: log.append((env.now, "second")))
    env.run()
    assert log == [(due_s, "first"), (due_s, "second")]


def test_the_engine_s_reading_of_the_clock_is_simpy_s_now():
    """The engine reads ``env._now`` (see simulator/engine/clock.py): it must be ``env.now``."""
    env = simpy.Environment(initial_time=0.25)
    seen: list[tuple[float, float]] = []
    for at_s in (0.5, 1.75, 1.75, 3.0):
        call_at(env, at_s, lambda: seen.append((env._now, env.now)))
    assert env._now == env.now == 0.25
    env.run(until=2.0)
    assert env._now == env.now == 2.0
    env.run()
    assert seen == [(0.5, 0.5), (1.75, 1.75), (1.75, 1.75), (3.0, 3.0)]


def test_an_action_in_the_past_runs_at_once_in_order():
    env = simpy.Environment()
    log: list[str] = []
    env.run(until=2.0)
    call_at(env, 1.0, lambda: log.append("late"))
    call_at(env, 2.0, lambda: log.append("now"))
    env.run()
    assert log == ["late", "now"]
    assert env.now == 2.0


def _trace(tmp_path, rows: list[str]) -> dict:
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return {"source": f"trace://{path}", "slo": {"ttft_ms": 1000, "tpot_ms": 100, "tvt_ms": 200}}


def _replica_log(tracer: ListTracer) -> list[tuple[str, str]]:
    return [
        (kind, detail)
        for _, kind, subject, detail in tracer.events
        if subject.startswith("replica") and kind != "prefill_queued"
    ]


def test_prompts_of_one_instant_share_a_prefill_batch(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=_trace(tmp_path, ["0.0,100,3", "0.0,100,3", "0.0,100,3"]),
        clients=1000,
        extra={"scheduler.prefill": {"batching": {"max_batch": 4, "max_wait_ms": 0}}},
    )
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    # Three devices' links: the prompts reach the replica at the same instant.
    assert result.requests["device"].nunique() == 3
    log = _replica_log(tracer)
    assert log[0] == ("prefill_start", "n=3 context=100.0")
    assert sum(kind == "prefill_start" for kind, _ in log) == 1


def test_bundles_that_arrive_during_an_iteration_join_the_next_batch(tmp_path):
    """A and B are prefilled together (0-12 ms) and their bundles arrive at 16 ms.

    C's prompt (13 ms) finds the replica idle and is prefilled alone
    (13-24 ms); both bundles arrive during that prefill and are verified
    together when it ends. C's own round follows.
    """
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=_trace(tmp_path, ["0.0,100,2", "0.0,100,2", "0.013,100,2"]),
        clients=1000,
        alpha=0.0,
        k=1,
        extra={"scheduler.prefill": {"batching": {"max_batch": 2, "max_wait_ms": 0}}},
    )
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    assert result.requests["device"].nunique() == 3  # three devices, no queueing on one
    times = {(kind, detail): t for t, kind, subject, detail in tracer.events}
    assert _replica_log(tracer) == [
        ("prefill_start", "n=2 context=100.0"),
        ("prefill_start", "n=1 context=100.0"),
        ("verify_start", "n=2 k=1"),
        ("verify_start", "n=1 k=1"),
    ]
    assert abs(times[("prefill_start", "n=1 context=100.0")] - 0.013) < 1e-3
    assert abs(times[("verify_start", "n=2 k=1")] - 0.024) < 1e-3
    assert (result.requests["outcome"] == "completed").all()


def test_a_device_serving_several_requests_drafts_those_ready_together_in_one_burst(tmp_path):
    """Two requests on one two-slot device, zero-byte payloads over a 0 ms link.

    The device prefills A (0-6 ms) then B (6-12 ms); the target prefills both
    together (0-12 ms), so at 12 ms B's draft prefill ends and both first
    tokens arrive. The device decides after those deliveries: one burst for both.
    """
    profile = yaml.safe_load((PROFILES / "rtx-4050-laptop.yaml").read_text())
    profile["compute"]["max_concurrent_requests"] = 2
    (tmp_path / "rtx-4050-laptop.yaml").write_text(yaml.safe_dump(profile))
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=_trace(tmp_path, ["0.0,100,3", "0.0,100,3"]),
        alpha=0.0,
        k=1,
        extra={
            "scheduler.prefill": {"batching": {"max_batch": 2, "max_wait_ms": 0}},
            "network.payload": {
                "bytes_per_prompt_token": 0,
                "bytes_per_draft_token": 0,
                "bytes_per_result_token": 0,
            },
        },
    )
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][0]["profile"] = str(tmp_path / "rtx-4050-laptop.yaml")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    bursts = [(t, detail) for t, kind, _, detail in tracer.events if kind == "draft_burst"]
    assert bursts[0] == (pytest.approx(0.012), "n=2 k=1")
    assert (result.requests["outcome"] == "completed").all()
