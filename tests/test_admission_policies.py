"""Admission policies and the engine's deferral of requests."""

from __future__ import annotations

import pandas as pd
import pytest

from policies import registry
from policies.admission import (
    AdmitAll,
    MaxInFlight,
    MaxInFlightParams,
    SloGuard,
    SloGuardParams,
    TokenBucket,
    TokenBucketParams,
)
from policies.base import promised_by_method
from policies.views import AdmissionDecision, AdmissionQuery
from simulator import load_scenario, run
from simulator.engine.tracing import ListTracer
from tests.engine_fixtures import synthetic, write_scenario


def _query(now_s: float = 0.0, **fields) -> AdmissionQuery:
    base = {"request_id": 0, "prompt_tokens": 100, "output_tokens": 10, "ttft_slo_ms": 100.0}
    base.update(fields)
    base.setdefault("queued_requests", 0)
    base.setdefault("kv_free_mb", 1e6)
    return AdmissionQuery(now_s, **base)


# -- policy-level decisions --------------------------------------------------------
def test_only_admit_all_declares_it_admits_every_query():
    """The engine skips the query of a policy declaring admits_all: it must admit any query."""
    family = registry("admission")
    declaring = [
        name
        for name in family.names()
        if promised_by_method(family.get(name), "admits_all", "decide")
    ]
    assert declaring == ["admit_all"]
    policy = AdmitAll()
    for query in (
        _query(),
        _query(5.0, queued_requests=10**6, kv_free_mb=0.0, waited_s=60.0),
        _query(predicted_queue_s=1e3, predicted_prefill_s=1e3, kv_need_mb=1e9),
    ):
        assert policy.decide(query) == AdmissionDecision(True)


def test_max_in_flight_defers_at_the_limit_and_never_rejects():
    policy = MaxInFlight(MaxInFlightParams(limit=2))
    assert policy.decide(_query(queued_requests=1)).admit
    held = policy.decide(_query(queued_requests=2))
    assert (held.admit, held.defer, held.retry_at_s) == (False, True, None)


def test_token_bucket_spends_its_burst_then_asks_again_when_a_token_is_due():
    policy = TokenBucket(TokenBucketParams(rate_per_s=4.0, burst=2))
    assert policy.decide(_query(0.0)).admit
    assert policy.decide(_query(0.0)).admit
    held = policy.decide(_query(0.1))
    assert (held.admit, held.defer) == (False, True)
    assert held.retry_at_s == pytest.approx(0.25)
    assert policy.decide(_query(0.25)).admit
    rejecting = TokenBucket(TokenBucketParams(rate_per_s=4.0, burst=1, on_empty="reject"))
    assert rejecting.decide(_query(0.0)).admit
    assert rejecting.decide(_query(0.1)) == AdmissionDecision(False, "token_bucket")


def test_slo_guard_compares_the_predicted_ttft_with_the_target():
    policy = SloGuard()
    meets = _query(waited_s=0.01, predicted_queue_s=0.05, predicted_prefill_s=0.04)
    breaks = _query(waited_s=0.01, predicted_queue_s=0.06, predicted_prefill_s=0.04)
    assert policy.decide(meets).admit
    assert policy.decide(breaks) == AdmissionDecision(False, "slo_guard")
    deferring = SloGuard(SloGuardParams(action="defer", max_defer_ms=30, recheck_ms=20))
    first = deferring.decide(_query(1.0, waited_s=0.0, predicted_queue_s=0.2))
    assert (first.defer, first.retry_at_s) == (True, pytest.approx(1.02))
    # The retry never goes past the last moment it may wait, and then it rejects.
    second = deferring.decide(_query(1.02, waited_s=0.02, predicted_queue_s=0.2))
    assert second.retry_at_s == pytest.approx(1.03)
    last = deferring.decide(_query(1.03, waited_s=0.03, predicted_queue_s=0.2))
    assert (last.admit, last.defer, last.reason) == (False, False, "slo_guard")


# -- in the engine -------------------------------------------------------------------
def _trace(tmp_path, rows: list[str], ttft_ms: float = 1000) -> dict:
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    return {"source": f"trace://{path}", "slo": {"ttft_ms": ttft_ms, "tpot_ms": 100}}


def _run(tmp_path, workload: dict, policy: str, params: dict) -> tuple[pd.DataFrame, ListTracer]:
    tmp_path.mkdir(exist_ok=True)
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=workload,
        extra={"scheduler.admission_control": {"policy": policy, "params": params}},
    )
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    return result.requests, tracer


def _times(tracer: ListTracer, kind: str) -> dict[int, float]:
    return {int(subject.split()[1]): t for t, k, subject, _ in tracer.events if k == kind}


def test_max_in_flight_never_exceeds_its_limit_and_admits_in_arrival_order(tmp_path):
    workload = synthetic(30, 200.0, 100, 5)
    requests, tracer = _run(tmp_path, workload, "max_in_flight", {"limit": 3})
    assert (requests["outcome"] == "completed").all()
    in_flight = peak = 0
    admitted: list[int] = []
    for _, kind, subject, _ in tracer.events:
        if kind == "admit":
            in_flight += 1
            admitted.append(int(subject.split()[1]))
        elif kind in ("complete", "reject"):
            in_flight -= 1
        peak = max(peak, in_flight)
    assert peak == 3
    assert admitted == sorted(admitted) == sorted(requests["request_id"])
    # A deferred request's wait counts in its TTFT.
    deferred = _times(tracer, "defer")
    assert deferred
    admit_s = _times(tracer, "admit")
    rows = requests.set_index("request_id")
    for rid in deferred:
        waited_ms = (admit_s[rid] - rows.loc[rid, "arrival_s"]) * 1000.0
        assert waited_ms > 0
        assert rows.loc[rid, "ttft_ms"] > waited_ms


def test_deferral_is_deterministic_for_a_seed(tmp_path):
    workload = synthetic(30, 200.0, 100, 5)
    first, _ = _run(tmp_path / "a", workload, "max_in_flight", {"limit": 2})
    second, _ = _run(tmp_path / "b", workload, "max_in_flight", {"limit": 2})
    pd.testing.assert_frame_equal(first, second)


def test_token_bucket_admits_at_its_rate(tmp_path):
    rows = ["0.0,100,2"] * 10
    requests, tracer = _run(
        tmp_path, _trace(tmp_path, rows), "token_bucket", {"rate_per_s": 10.0, "burst": 2}
    )
    assert (requests["outcome"] == "completed").all()
    admits = sorted(_times(tracer, "admit").values())
    assert admits == pytest.approx([0.0, 0.0] + [0.1 * n for n in range(1, 9)])


def test_token_bucket_may_reject_instead(tmp_path):
    rows = ["0.0,100,2"] * 10
    params = {"rate_per_s": 10.0, "burst": 2, "on_empty": "reject"}
    requests, _ = _run(tmp_path, _trace(tmp_path, rows), "token_bucket", params)
    assert (requests["outcome"] == "completed").sum() == 2
    rejected = requests[requests["outcome"] == "rejected"]
    assert len(rejected) == 8 and (rejected["reason"] == "token_bucket").all()


def test_slo_guard_rejects_exactly_the_requests_predicted_late(tmp_path):
    """Five 1000-token prompts at 0, prefilled one at a time in 20 ms each; TTFT target 70 ms.

    Predicted TTFTs: 20, 40, 60 ms admitted; 80 ms for the fourth and the
    fifth (the fourth was rejected, so the queue is unchanged) rejected. A
    sixth arriving later finds the replica free.
    """
    rows = ["0.0,1000,2"] * 5 + ["1.0,1000,2"]
    requests, _ = _run(tmp_path, _trace(tmp_path, rows, ttft_ms=70), "slo_guard", {})
    rows_by_id = requests.sort_values("request_id")
    outcomes = list(rows_by_id["outcome"])
    assert outcomes == ["completed"] * 3 + ["rejected"] * 2 + ["completed"]
    assert (rows_by_id[rows_by_id["outcome"] == "rejected"]["reason"] == "slo_guard").all()
    completed = rows_by_id[rows_by_id["outcome"] == "completed"]
    assert (completed["ttft_ms"] <= 70 + 1e-6).all()


def test_slo_guard_defers_up_to_its_limit_then_rejects(tmp_path):
    rows = ["0.0,1000,2"] * 5
    params = {"action": "defer", "max_defer_ms": 50, "recheck_ms": 10}
    requests, tracer = _run(tmp_path, _trace(tmp_path, rows, ttft_ms=70), "slo_guard", params)
    ids = sorted(requests["request_id"])
    assert list(_times(tracer, "defer")) == [ids[3]]
    rejects = _times(tracer, "reject")
    assert sorted(rejects) == ids[3:]
    assert list(rejects.values()) == pytest.approx([0.05, 0.05])


@pytest.mark.parametrize("mode", ["distributed", "fused"])
def test_deferred_requests_complete_in_every_mode(tmp_path, mode):
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=synthetic(20, 100.0, 100, 12),
        clients=4,
        extra={"scheduler.admission_control": {"policy": "max_in_flight", "params": {"limit": 2}}},
    )
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    assert (result.requests["outcome"] == "completed").all()
    assert _times(tracer, "defer")
