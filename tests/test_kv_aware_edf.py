"""The KV-aware EDF verify policy: its decisions, delays and spills to fused mode."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from policies.batching import BatchLimits, EdfVerify, KvAwareEdfParams, KvAwareEdfVerify
from policies.views import BatchChoice, QueuedItem
from simulator import load_scenario, run
from simulator.engine.tracing import ListTracer
from simulator.errors import InputError
from tests.engine_fixtures import PROFILES, synthetic, write_lut, write_scenario


def _item(request_id: int, deadline_s: float, kv_need_mb: float, free_mb: float) -> QueuedItem:
    return QueuedItem(request_id, 0.0, deadline_s, 1000, 5, kv_need_mb, free_mb)


def _policy(action: str = "delay", max_batch: int = 4) -> KvAwareEdfVerify:
    return KvAwareEdfVerify(
        BatchLimits(max_batch=max_batch, max_wait_ms=0), KvAwareEdfParams(action)
    )


# -- policy-level decisions --------------------------------------------------------
def test_with_plentiful_kv_it_serves_edf_order():
    waiting = [_item(0, 0.9, 3.0, 1e6), _item(1, 0.3, 3.0, 1e6), _item(2, 0.5, 3.0, 1e6)]
    limits = BatchLimits(max_batch=2, max_wait_ms=0)
    assert _policy(max_batch=2).select(waiting, 1.0).take == (1, 2)
    assert EdfVerify(limits).select(waiting, 1.0).take == (1, 2)


def test_delay_skips_the_item_that_does_not_fit_and_serves_the_next_that_fits():
    # 10 MB free. EDF order 0, 1, 2. Item 0 alone: 1 x 4 = 4 MB, fits. With item 1
    # the batch pads to its 8 MB: 2 x 8 = 16 MB > 10, so item 1 waits. With item 2:
    # 2 x 4 = 8 MB, fits: it is served (no head-of-line blocking).
    waiting = [_item(0, 0.3, 4.0, 10.0), _item(1, 0.4, 8.0, 10.0), _item(2, 0.5, 4.0, 10.0)]
    assert _policy("delay").select(waiting, 1.0) == BatchChoice((0, 2))
    assert _policy("spill_fused").select(waiting, 1.0) == BatchChoice((0, 2), spill=(1,))


def test_delay_runs_the_edf_batch_when_not_even_one_item_fits():
    waiting = [_item(0, 0.5, 4.0, 3.0), _item(1, 0.3, 4.0, 3.0)]
    assert _policy("delay").select(waiting, 1.0) == BatchChoice((1, 0))
    # Spilling moves every item that does not fit; none runs.
    assert _policy("spill_fused").select(waiting, 1.0) == BatchChoice((), spill=(1, 0))


def test_it_keeps_the_size_timeout_rule():
    policy = KvAwareEdfVerify(BatchLimits(max_batch=4, max_wait_ms=10))
    waiting = [_item(0, 0.3, 4.0, 10.0)]
    assert policy.select(waiting, 0.0) == BatchChoice((), wake_at_s=pytest.approx(0.010))


def test_unknown_action_is_refused_by_the_params():
    with pytest.raises(ValueError, match="on_kv_short"):
        KvAwareEdfParams("evict")


# -- in a run ---------------------------------------------------------------------------
def _scenario(tmp_path, mode: str, action: str, *, fused: bool = True, kv_limit_mb=3000.0):
    """40 requests of 500 tokens (10 GB of KV at the end) on a replica with 3 GB of KV."""
    profile = yaml.safe_load((PROFILES / "a100-tp1.yaml").read_text())
    if kv_limit_mb is not None:
        profile["memory"]["kv_cache_limit_mb"] = kv_limit_mb
        profile["sources"]["memory.kv_cache_limit_mb"] = "test configuration"
    (tmp_path / "a100-tp1.yaml").write_text(yaml.safe_dump(profile))
    extra = {
        "scheduler.kv": {"on_full": "preempt_recompute"},
        "scheduler.verify.policy": "kv_aware_edf",
        "scheduler.verify.params": {"on_kv_short": action},
    }
    if mode == "hybrid":
        # A zero-RTT link is under the threshold: every request starts distributed.
        extra["speculation.hybrid"] = {"policy": "rtt_threshold", "params": {"threshold_ms": 30}}
    path = write_scenario(
        tmp_path, mode=mode, workload=synthetic(40, 20, 300, 200), clients=20, extra=extra
    )
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][1]["profile"] = str(tmp_path / "a100-tp1.yaml")
    if mode == "distributed" and fused:
        document["speculation"]["fused_models"] = [{"name": "fused-model", "lut": "fused.csv"}]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.fixture
def decisions(monkeypatch) -> list[tuple[list[QueuedItem], BatchChoice]]:
    """Every verify decision of a kv_aware_edf policy, with the items it saw."""
    calls: list[tuple[list[QueuedItem], BatchChoice]] = []
    original = KvAwareEdfVerify.select

    def recording(self, waiting, now_s):
        choice = original(self, waiting, now_s)
        if waiting and waiting[0].kv_free_mb < math.inf:  # the verify lane, not fused rounds
            calls.append((list(waiting), choice))
        return choice

    monkeypatch.setattr(KvAwareEdfVerify, "select", recording)
    return calls


def _check_tokens(frame: pd.DataFrame) -> None:
    assert (frame["outcome"] == "completed").all()
    assert (frame["generated_tokens"] == frame["output_tokens"]).all()


@pytest.mark.parametrize("mode", ["distributed", "hybrid"])
def test_spill_moves_exactly_the_requests_that_do_not_fit(tmp_path, decisions, mode):
    result = run(load_scenario(_scenario(tmp_path, mode, "spill_fused")))
    frame = result.requests
    _check_tokens(frame)
    spilled_ids: list[int] = []
    for items, choice in decisions:
        free_mb = items[0].kv_free_mb
        taken = [items[i] for i in choice.take]
        widest = max((item.kv_need_mb for item in taken), default=0.0)
        assert widest * len(taken) <= free_mb + 1e-9
        for i in choice.spill:
            # It did not fit beside the items taken before it in EDF order.
            before = [items[j] for j in choice.take if items[j].deadline_s <= items[i].deadline_s]
            wide = max([items[i].kv_need_mb] + [item.kv_need_mb for item in before])
            assert wide * (len(before) + 1) > free_mb
        spilled_ids += [items[i].request_id for i in choice.spill]
    assert spilled_ids, "the scenario must run short of KV"
    assert len(spilled_ids) == len(set(spilled_ids))  # a request spills once
    spilled = frame[frame["spilled"]]
    assert sorted(spilled["request_id"]) == sorted(spilled_ids)
    assert (spilled["mode"] == "fused").all()
    assert (frame.loc[~frame["spilled"], "mode"] == "distributed").all()
    assert result.summary["requests"]["spilled_to_fused"] == len(spilled_ids)


def test_requests_beyond_the_fused_context_window_are_not_spilled(tmp_path):
    """The fused model's LUT ends at 400 tokens; 300 + 200 + k_max do not fit it."""
    path = _scenario(tmp_path, "distributed", "spill_fused")
    write_lut(
        tmp_path / "fused.csv",
        "fused-model",
        "a100-sxm4-80gb",
        {
            "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
            "fused_decode": lambda c, b, k: 22.0 + 2.0 * k + 0.001 * c * b * (k + 1),
        },
        contexts=(1, 400),
    )
    result = run(load_scenario(path))
    _check_tokens(result.requests)
    assert not result.requests["spilled"].any()
    assert result.requests["preemptions"].sum() > 0  # short of KV, they waited or were evicted


def test_delay_holds_what_does_not_fit_and_spills_nothing(tmp_path, decisions):
    result = run(load_scenario(_scenario(tmp_path, "distributed", "delay", fused=False)))
    _check_tokens(result.requests)
    assert not result.requests["spilled"].any()
    assert result.summary["requests"]["spilled_to_fused"] == 0
    held = 0
    for items, choice in decisions:
        assert not choice.spill
        taken = [items[i] for i in choice.take]
        widest = max(item.kv_need_mb for item in taken)
        fits = widest * len(taken) <= items[0].kv_free_mb + 1e-9
        # A batch that does not fit is the plain EDF batch, run when not even one item fits.
        if not fits:
            assert all(item.kv_need_mb > items[0].kv_free_mb for item in items)
        held += len(items) > len(choice.take) and fits
    assert held > 0, "some decision must hold back an item that does not fit"


def test_with_kv_reserved_at_prefill_it_is_refused(tmp_path):
    """Under on_full: queue a verify step adds no KV: the guard would never act."""
    path = _scenario(tmp_path, "distributed", "delay", fused=False, kv_limit_mb=None)
    document = yaml.safe_load(path.read_text())
    document["scheduler"]["kv"] = {"on_full": "queue"}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(InputError) as err:
        load_scenario(path)
    text = str(err.value)
    assert "scheduler.verify.policy" in text
    assert "'kv_aware_edf'" in text
    assert "kv_aware_edf with scheduler.kv.on_full preempt_recompute" in text


def test_spill_without_a_fused_model_is_refused(tmp_path):
    with pytest.raises(InputError) as err:
        load_scenario(_scenario(tmp_path, "distributed", "spill_fused", fused=False))
    text = str(err.value)
    assert "scheduler.verify.params.on_kv_short" in text
    assert "'spill_fused'" in text
    assert "delay, or a fused model declared under speculation.fused_models" in text


def test_the_guard_in_a_mode_without_verify_steps_is_refused(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(4, 20, 300, 20),
        extra={
            "scheduler.kv": {"on_full": "preempt_recompute"},
            "scheduler.verify.policy": "kv_aware_edf",
            "scheduler.verify.params": {"on_kv_short": "spill_fused"},
        },
    )
    with pytest.raises(InputError, match="edf: mode 'fused' runs no verify steps"):
        load_scenario(path)


def test_spills_keep_the_chunked_prefill_token_budget(tmp_path, decisions):
    path = _scenario(tmp_path, "distributed", "spill_fused")
    document = yaml.safe_load(path.read_text())
    document["scheduler"]["arbitration"] = {
        "policy": "chunked_prefill",
        "params": {"token_budget": 64},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    tracer = ListTracer()
    result = run(load_scenario(path), tracer=tracer)
    _check_tokens(result.requests)
    assert result.requests["spilled"].any()
    for _t, kind, _subject, detail in tracer.events:
        if kind == "mixed_start" and detail.startswith("verify"):
            n = int(detail.split()[1].removeprefix("n="))
            # Each verify takes k + 1 >= 2 tokens: past 32 the budget would be broken.
            assert n == 1 or 2 * n <= 64
