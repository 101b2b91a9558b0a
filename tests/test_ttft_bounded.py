"""The TTFT-bounded prefill batching policy: decisions and a hand-computed schedule."""

from __future__ import annotations

import pytest

from policies.batching import BatchLimits, TtftBoundedPrefill
from policies.views import BatchChoice, QueuedItem
from simulator import load_scenario, run
from simulator.engine.tracing import ListTracer
from simulator.errors import InputError
from tests.engine_fixtures import synthetic, write_scenario


def _prompt(request_id: int, enqueued_s: float, deadline_s: float, prefill_s: float) -> QueuedItem:
    return QueuedItem(request_id, enqueued_s, deadline_s, 0, 1000, prefill_s=prefill_s)


def test_it_waits_until_the_latest_start_that_meets_the_earliest_ttft():
    policy = TtftBoundedPrefill(BatchLimits(max_batch=4, max_wait_ms=1000))
    waiting = [_prompt(0, 0.0, 0.2, 0.020), _prompt(1, 0.01, 0.21, 0.030)]
    # The batch of both takes 30 ms; the earliest deadline is 0.2: start by 0.17.
    assert policy.select(waiting, 0.01) == BatchChoice((), wake_at_s=pytest.approx(0.17))
    assert policy.select(waiting, 0.17).take == (0, 1)
    # A deadline already out of reach runs the batch now.
    assert policy.select(waiting, 0.19).take == (0, 1)


def test_it_runs_when_full_or_at_max_wait():
    waiting = [_prompt(0, 0.0, 0.2, 0.020), _prompt(1, 0.01, 0.21, 0.030)]
    full = TtftBoundedPrefill(BatchLimits(max_batch=2, max_wait_ms=1000))
    assert full.select(waiting, 0.01).take == (0, 1)
    short_wait = TtftBoundedPrefill(BatchLimits(max_batch=4, max_wait_ms=100))
    assert short_wait.select(waiting, 0.01) == BatchChoice((), wake_at_s=pytest.approx(0.1))
    # A token budget that the second prompt would break: the first runs alone, now.
    budget = TtftBoundedPrefill(BatchLimits(max_batch=4, max_wait_ms=1000, max_tokens=1500))
    assert budget.select(waiting, 0.01).take == (0,)


def _prefill_starts(tmp_path, policy: str, max_wait_ms: float) -> list[tuple[float, str]]:
    tmp_path.mkdir()
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,1000,2\n0.01,1000,2\n0.5,1000,2\n")
    path = write_scenario(
        tmp_path,
        mode="none",
        workload={"source": f"trace://{trace}", "slo": {"ttft_ms": 200, "tpot_ms": 100}},
        extra={
            "scheduler.prefill": {
                "policy": policy,
                "batching": {"max_batch": 4, "max_wait_ms": max_wait_ms},
            }
        },
    )
    tracer = ListTracer()
    run(load_scenario(path), tracer=tracer)
    return [(t, detail) for t, kind, _subject, detail in tracer.events if kind == "prefill_start"]


def test_hand_computed_schedule(tmp_path):
    """Prefill of n prompts of 1000 tokens takes 10 + 0.01 x 1000 x n ms (the fixture's LUT).

    TTFT target 200 ms. Request 0 arrives at 0: alone its prefill takes 20 ms, so it could
    wait until 0.18. Request 1 arrives at 0.01: the batch of two takes 30 ms and request 0's
    deadline is 0.2, so the batch starts at 0.17. Request 2 arrives alone at 0.5: it starts
    at 0.5 + 0.2 - 0.02 = 0.68. With fcfs and the same 1000 ms wait all three wait for 1.0,
    missing every TTFT.
    """
    bounded = _prefill_starts(tmp_path / "bounded", "ttft_bounded", 1000)
    assert [t for t, _ in bounded] == pytest.approx([0.17, 0.68])
    assert [d.split()[0] for _, d in bounded] == ["n=2", "n=1"]
    fcfs = _prefill_starts(tmp_path / "fcfs", "fcfs", 1000)
    assert [t for t, _ in fcfs] == pytest.approx([1.0])
    assert [d.split()[0] for _, d in fcfs] == ["n=3"]
    # max_wait_ms still bounds the wait when it comes first.
    capped = _prefill_starts(tmp_path / "capped", "ttft_bounded", 100)
    assert [t for t, _ in capped] == pytest.approx([0.1, 0.6])


def test_it_is_refused_with_chunked_prefill(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(4, 20, 300, 20),
        extra={
            "scheduler.prefill": {"policy": "ttft_bounded"},
            "scheduler.arbitration": {"policy": "chunked_prefill"},
        },
    )
    with pytest.raises(InputError, match=r"scheduler\.prefill\.policy"):
        load_scenario(path)
