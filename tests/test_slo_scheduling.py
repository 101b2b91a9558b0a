"""Deadlines of queued items and the deadline-aware verify batching policies."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.batching import (
    BatchLimits,
    EdfVerify,
    FcfsVerify,
    KvAwareEdfVerify,
    LeastSlackParams,
    LeastSlackVerify,
    SizeTimeoutBatcher,
    TtftBoundedPrefill,
)
from policies.views import QueuedItem
from simulator import load_scenario, run
from simulator.engine.tracing import ListTracer
from tests.engine_fixtures import write_scenario


def _item(request_id: int, enqueued_s: float, deadline_s: float, new_tokens: int = 5) -> QueuedItem:
    return QueuedItem(request_id, enqueued_s, deadline_s, 1000, new_tokens)


# -- policy-level decisions --------------------------------------------------------
def test_edf_takes_the_earliest_deadlines_within_the_batch_size():
    policy = EdfVerify(BatchLimits(max_batch=2, max_wait_ms=0))
    waiting = [_item(0, 0.0, 0.9), _item(1, 0.1, 0.3), _item(2, 0.2, 0.5)]
    assert policy.select(waiting, 1.0).take == (1, 2)


def test_edf_breaks_deadline_ties_by_arrival_then_queue_order():
    policy = EdfVerify(BatchLimits(max_batch=3, max_wait_ms=0))
    waiting = [_item(0, 0.2, 0.5), _item(1, 0.1, 0.5), _item(2, 0.1, 0.5), _item(3, 0.0, math.inf)]
    assert policy.select(waiting, 1.0).take == (1, 2, 0)


def test_edf_keeps_the_size_timeout_rule_and_the_token_budget():
    policy = EdfVerify(BatchLimits(max_batch=4, max_wait_ms=10, max_tokens=8))
    waiting = [_item(0, 0.0, 0.9), _item(1, 0.001, 0.1)]
    # Fewer than max_batch and the oldest has waited 5 of 10 ms: wait until due.
    assert policy.select(waiting, 0.005) == policy.select(waiting, 0.005)._replace(take=())
    assert policy.select(waiting, 0.005).wake_at_s == pytest.approx(0.010)
    # Due: the earliest deadline first, and 5 + 5 tokens exceed the budget of 8.
    assert policy.select(waiting, 0.010).take == (1,)


def test_least_slack_accounts_for_the_predicted_service_time():
    params = LeastSlackParams(base_ms=1.0, per_new_token_ms=10.0)
    policy = LeastSlackVerify(BatchLimits(max_batch=1, max_wait_ms=0), params)
    # Item 0: deadline 0.20, service 1 + 10 * 15 = 151 ms, slack 0.049.
    # Item 1: deadline 0.10, service 1 + 10 * 2 = 21 ms, slack 0.079.
    waiting = [_item(0, 0.0, 0.20, new_tokens=15), _item(1, 0.0, 0.10, new_tokens=2)]
    assert policy.slack_s(waiting[0], 0.0) == pytest.approx(0.049)
    assert policy.slack_s(waiting[1], 0.0) == pytest.approx(0.079)
    assert policy.select(waiting, 0.0).take == (0,)
    # Without a service model it orders as EDF.
    plain = LeastSlackVerify(BatchLimits(max_batch=1, max_wait_ms=0))
    assert plain.select(waiting, 0.0).take == (1,)


# -- the deadlines the engine gives queued items -------------------------------------
def _trace(tmp_path, rows: list[str], slo: dict, classes: dict | None = None) -> dict:
    path = tmp_path / "trace.csv"
    header = "arrival_s,prompt_tokens,output_tokens" + (",slo_class" if classes else "")
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    workload: dict = {"source": f"trace://{path}", "slo": slo}
    if classes:
        workload["slo_classes"] = classes
    return workload


@pytest.fixture
def seen(monkeypatch) -> list[tuple[float, list[QueuedItem]]]:
    """Every (now, waiting items) a size/timeout batcher is asked about (lone items too)."""
    calls: list[tuple[float, list[QueuedItem]]] = []
    original = SizeTimeoutBatcher.select
    original_init = SizeTimeoutBatcher.__init__

    def recording(self, waiting, now_s):
        calls.append((now_s, list(waiting)))
        return original(self, waiting, now_s)

    def asked_about_everything(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self.takes_lone_item = False  # so the engine asks about a lone item as well
        self.orders_by_arrival = False  # and gives it the items' views

    monkeypatch.setattr(SizeTimeoutBatcher, "select", recording)
    monkeypatch.setattr(SizeTimeoutBatcher, "__init__", asked_about_everything)
    return calls


def test_prefill_and_decode_deadlines_follow_ttft_and_tpot(tmp_path, seen):
    slo = {"ttft_ms": 500, "tpot_ms": 100}
    path = write_scenario(tmp_path, mode="none", workload=_trace(tmp_path, ["0.0,100,4"], slo))
    result = run(load_scenario(path))
    arrival_s = result.requests["arrival_s"].iloc[0]
    first_token_s = arrival_s + result.requests["ttft_server_ms"].iloc[0] / 1000.0
    prefill = [items[0] for _, items in seen if items[0].new_tokens == 100]
    decode = [items[0] for _, items in seen if items[0].new_tokens == 1]
    assert prefill[0].deadline_s == pytest.approx(arrival_s + 0.5)
    # The second token (one generated so far) is due one TPOT after the first.
    assert decode[0].deadline_s == pytest.approx(first_token_s + 0.1)


def test_verify_deadlines_follow_tvt_when_the_class_has_one_else_tpot(tmp_path, seen):
    slo = {"ttft_ms": 1000, "tpot_ms": 100, "tvt_ms": 200}
    classes = {"loose": {"ttft_ms": 1000, "tpot_ms": 300}}
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=_trace(tmp_path, ["0.0,100,8,default", "0.5,100,8,loose"], slo, classes),
        clients=1000,
        alpha=0.0,
        k=1,
    )
    result = run(load_scenario(path))
    assert (result.requests["outcome"] == "completed").all()
    verify = [items[0] for _, items in seen if items[0].new_tokens == 2 and items[0].context_len]
    by_request: dict[int, list[QueuedItem]] = {}
    for item in verify:
        by_request.setdefault(item.request_id, []).append(item)
    first, second = sorted(by_request)
    # Default class: one TVT after the bundle was sent (the link takes next to no time).
    for item in by_request[first]:
        assert item.deadline_s - item.enqueued_s == pytest.approx(0.2, abs=1e-3)
    # No TVT target: the TPOT pace from the first token, k=1 and alpha=0 give one token a round.
    row = result.requests.set_index("request_id").loc[second]
    first_token_s = row["arrival_s"] + row["ttft_server_ms"] / 1000.0
    gaps = [item.deadline_s - first_token_s for item in by_request[second]]
    assert gaps == pytest.approx([0.3 * n for n in range(1, len(gaps) + 1)])


# -- an event-order log of a real run ------------------------------------------------
def _two_classes_run(tmp_path, policy: str) -> list[tuple[float, str]]:
    """Two requests decoded one per iteration; request 1's class has the tighter TPOT."""
    tmp_path.mkdir()
    slo = {"ttft_ms": 1000, "tpot_ms": 1000}
    classes = {"tight": {"ttft_ms": 1000, "tpot_ms": 10}}
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=_trace(tmp_path, ["0.0,100,4,default", "0.0,100,4,tight"], slo, classes),
        extra={
            "scheduler.prefill": {"batching": {"max_batch": 2, "max_wait_ms": 0}},
            "scheduler.verify": {"policy": policy, "batching": {"max_batch": 1, "max_wait_ms": 0}},
        },
    )
    tracer = ListTracer()
    run(load_scenario(path), tracer=tracer)
    return [(t, subject) for t, kind, subject, _ in tracer.events if kind == "complete"]


def test_edf_serves_the_earliest_deadline_first_in_a_real_run(tmp_path):
    fcfs = _two_classes_run(tmp_path / "fcfs", "fcfs")
    edf = _two_classes_run(tmp_path / "edf", "edf")
    # FCFS alternates the two (request 0 first each time): it finishes first.
    assert [subject for _, subject in fcfs] == ["request 0", "request 1"]
    # EDF decodes the tight request's every token before the loose one's next.
    assert [subject for _, subject in edf] == ["request 1", "request 0"]
    assert edf[0][0] < fcfs[1][0]


# -- a lone item ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "max_batch", "max_wait_ms", "takes"),
    [
        (FcfsVerify, 128, 0.0, True),
        (FcfsVerify, 128, 5.0, False),
        (FcfsVerify, 1, 5.0, True),
        (EdfVerify, 8, 0.0, True),
        (KvAwareEdfVerify, 8, 0.0, False),
        (TtftBoundedPrefill, 8, 0.0, False),
    ],
)
def test_takes_lone_item_only_where_select_takes_it(policy, max_batch, max_wait_ms, takes):
    lane = policy(BatchLimits(max_batch, max_wait_ms))
    assert lane.takes_lone_item is takes
    if takes:
        for enqueued_s in (0.0, 1.0):
            item = QueuedItem(7, enqueued_s, math.inf, 100, 5)
            assert lane.select([item], 1.0).take == (0,)


@pytest.mark.parametrize(
    ("policy", "orders"),
    [
        (FcfsVerify, True),
        (SizeTimeoutBatcher, True),
        (EdfVerify, False),
        (LeastSlackVerify, False),
        (KvAwareEdfVerify, False),
        (TtftBoundedPrefill, False),
    ],
)
def test_orders_by_arrival_only_where_select_is_the_first_come_rule(policy, orders):
    assert policy(BatchLimits(8, 0.0)).orders_by_arrival is orders


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0]), st.integers(1, 9)),
        min_size=1,
        max_size=12,
    ),
    max_batch=st.integers(1, 6),
    max_wait_ms=st.sampled_from([0.0, 700.0, 5000.0]),
    max_tokens=st.one_of(st.none(), st.integers(1, 20)),
    now_s=st.sampled_from([1.0, 2.0, 9.0]),
)
def test_select_by_arrival_chooses_as_select_does(items, max_batch, max_wait_ms, max_tokens, now_s):
    """The engine's column path (no views) takes what ``select`` takes, ties in queue order."""
    lane = FcfsVerify(BatchLimits(max_batch, max_wait_ms, max_tokens))
    views = [
        QueuedItem(i, enqueued, math.inf, 100, tokens) for i, (enqueued, tokens) in enumerate(items)
    ]
    enqueued_s = [enqueued for enqueued, _ in items]
    new_tokens = [tokens for _, tokens in items] if max_tokens is not None else []
    assert lane.select_by_arrival(enqueued_s, new_tokens, now_s) == lane.select(views, now_s)
