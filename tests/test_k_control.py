"""Adaptive draft-length controllers: crafted signal sequences and engine runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from policies.k_control import (
    AcceptanceFeedback,
    AcceptanceFeedbackParams,
    Backpressure,
    BackpressureParams,
    Bandit,
    BanditParams,
    BatchThreshold,
    BatchThresholdParams,
    Goodput,
    GoodputParams,
    Pid,
    PidParams,
    StaticK,
    expected_tokens,
)
from policies.lanes import VERIFY
from policies.views import KSignals, RoundOutcome
from simulator import load_scenario, run
from simulator.engine.core import Engine
from simulator.engine.runtime import build_runtime
from simulator.errors import InputError
from simulator.rng import RandomStreams
from simulator.runner import build_requests
from tests.engine_fixtures import synthetic, write_scenario


def signals(**fields: Any) -> KSignals:
    base: dict[str, Any] = {
        "now_s": 0.0,
        "k_current": 4,
        "k_min": 1,
        "k_max": 8,
        "acceptance_rate": math.nan,
        "verify_queue_len": 0,
        "context_len": 100,
        "replica": 0,
    }
    base.update(fields)
    return KSignals(**base)


# -- crafted signal sequences -------------------------------------------------
def test_backpressure_lowers_k_as_the_queue_grows_and_raises_it_back():
    controller = Backpressure(4, BackpressureParams(high_queue=8, low_queue=2, step=1))
    rising = [controller.next_k(signals(verify_queue_len=q)) for q in (5, 8, 9, 12, 20, 30, 40)]
    assert rising == [4, 3, 2, 1, 1, 1, 1]  # 5 is inside the dead band; k_min bounds it
    held = [controller.next_k(signals(verify_queue_len=q)) for q in (5, 3)]
    assert held == [1, 1]
    falling = [controller.next_k(signals(verify_queue_len=q)) for q in (2, 1, 0, 0, 0, 0, 0, 0)]
    assert falling == [2, 3, 4, 5, 6, 7, 8, 8]  # k_max bounds it


def test_backpressure_keeps_one_k_per_replica():
    controller = Backpressure(4, BackpressureParams(high_queue=8, low_queue=2, step=2))
    assert controller.next_k(signals(replica=0, verify_queue_len=10)) == 2
    assert controller.next_k(signals(replica=1, verify_queue_len=5)) == 4
    assert controller.next_k(signals(replica=0, verify_queue_len=5)) == 2


@pytest.mark.parametrize(("running", "expected"), [(0, 5), (15, 5), (16, 2), (40, 2)])
def test_batch_threshold_switches_at_its_size(running, expected):
    controller = BatchThreshold(5, BatchThresholdParams(max_running=16))
    assert controller.next_k(signals(k_min=2, running_batch=running)) == expected


def _feedback(**params: Any) -> AcceptanceFeedback:
    return AcceptanceFeedback(4, AcceptanceFeedbackParams(every_rounds=1, **params))


CALM: dict[str, Any] = {"verify_queue_len": 0, "decode_p95_ms": 30.0, "window_acceptance": 0.8}


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("verify_queue_len", 10, 4),  # at Q_hi: no shrink (and not calm: no grow)
        ("verify_queue_len", 11, 3),
        ("decode_p95_ms", 50.0, 4),
        ("decode_p95_ms", 50.5, 3),
        ("window_acceptance", 0.35, 4),
        ("window_acceptance", 0.34, 3),
        ("verify_queue_len", 1, 4),  # growing needs queue < Q_lo
        ("decode_p95_ms", 45.0, 4),  # and p95 < P_lo
        ("window_acceptance", 0.65, 4),  # and acceptance > A_hi
        ("decode_p95_ms", math.nan, 4),  # unmeasured: neither shrink nor grow
    ],
)
def test_acceptance_feedback_thresholds(field, value, expected):
    controller = _feedback()
    assert controller.next_k(signals(**{**CALM, field: value})) == expected


def test_acceptance_feedback_grows_when_calm_and_decides_every_n_rounds():
    controller = AcceptanceFeedback(4, AcceptanceFeedbackParams(every_rounds=3))
    ks = [controller.next_k(signals(**CALM)) for _ in range(9)]
    assert ks == [4, 4, 5, 5, 5, 6, 6, 6, 7]
    busy = {**CALM, "verify_queue_len": 20}
    ks = [controller.next_k(signals(**busy)) for _ in range(6)]
    assert ks == [7, 7, 6, 6, 6, 5]


def test_acceptance_feedback_stays_in_range():
    controller = _feedback()
    low = {**CALM, "window_acceptance": 0.1}
    ks = [controller.next_k(signals(k_min=2, **low)) for _ in range(5)]
    assert ks == [3, 2, 2, 2, 2]
    ks = [controller.next_k(signals(k_min=2, **CALM)) for _ in range(8)]
    assert ks[-1] == 8


def test_pid_tracks_its_delay_set_point():
    controller = Pid(4, PidParams(delay_target_ms=20.0, kp=2.0, ki=0.5, kd=0.0, every_rounds=1))
    # No delay measured yet: k stays at speculation.k.
    assert controller.next_k(signals(queue_delay_ms=math.nan)) == 4
    # On the set point: error 0, k stays.
    assert controller.next_k(signals(queue_delay_ms=20.0)) == 4
    # Twice the set point: error -1 -> 4 - 2 - 0.5 = 1.5 -> 2; the integral keeps pushing down.
    assert controller.next_k(signals(queue_delay_ms=40.0)) == 2
    assert controller.next_k(signals(queue_delay_ms=40.0)) == 1  # saturated at k_min
    # An idle queue: error +1 -> 4 + 2 + 0.5 * (integral) grows k back.
    ks = [controller.next_k(signals(queue_delay_ms=0.0)) for _ in range(6)]
    assert ks[0] >= 4
    assert ks == sorted(ks)
    assert ks[-1] == 8


def test_pid_integral_does_not_wind_up_while_saturated():
    controller = Pid(4, PidParams(kp=0.0, ki=1.0, every_rounds=1))
    for _ in range(50):
        assert controller.next_k(signals(queue_delay_ms=200.0)) == 1
    # Had the error been summed while clipped, k would stay at k_min for ~50 decisions.
    ks = [controller.next_k(signals(queue_delay_ms=0.0)) for _ in range(4)]
    assert ks[-1] > 1


def _outcome(k: int, gained: int, target_ms: float, replica: int = 0) -> RoundOutcome:
    return RoundOutcome(0.0, replica, k, gained - 1, gained, target_ms / 1000.0)


def test_bandit_tries_every_k_then_exploits_the_best_reward():
    controller = Bandit(4, BanditParams(exploration=0.1))
    low = {"k_min": 2, "k_max": 4}
    for k in (2, 3, 4):
        assert controller.next_k(signals(**low)) == k  # untried ks first, smallest first
        controller.observe(_outcome(k, k + 1, 10.0 * k))  # reward (k + 1) / (10 k) per ms
    # k = 2 pays best (0.15 tokens/ms against 0.133 and 0.125).
    assert [controller.next_k(signals(**low)) for _ in range(3)] == [2, 2, 2]
    # Another replica learns on its own.
    assert controller.next_k(signals(replica=1, **low)) == 2
    controller.observe(_outcome(2, 1, 10.0, replica=1))
    assert controller.next_k(signals(replica=1, **low)) == 3


def test_bandit_explores_an_arm_it_has_played_little():
    controller = Bandit(4, BanditParams(exploration=1.0))
    for _ in range(50):
        controller.observe(_outcome(1, 2, 10.0))
    controller.observe(_outcome(2, 2, 11.0))  # slightly worse, played once
    assert controller.next_k(signals(k_min=1, k_max=2)) == 2


def test_bandit_ignores_rounds_without_a_timed_step():
    controller = Bandit(4)
    controller.observe(RoundOutcome(0.0, 0, 1, 0, 1, math.nan))
    assert controller.next_k(signals(k_min=1, k_max=2)) == 1  # k = 1 still untried


def test_controllers_without_feedback_ignore_rounds():
    for cls in (StaticK, Backpressure, BatchThreshold, AcceptanceFeedback, Pid):
        told, untold = cls(4), cls(4)
        told.observe(_outcome(4, 5, 10.0))
        assert [told.next_k(signals()) for _ in range(3)] == [
            untold.next_k(signals()) for _ in range(3)
        ]


def test_static_reads_no_windowed_signals():
    assert StaticK.signal_window == 0
    assert not getattr(StaticK, "predicts_iteration", False)
    assert Goodput.predicts_iteration
    assert Goodput(4, GoodputParams(window=16)).signal_window == 16
    assert AcceptanceFeedback(4, AcceptanceFeedbackParams(window=16)).signal_window == 16


# -- engine runs ------------------------------------------------------------------
OVERLOADED_VERIFY = {"scheduler.verify.batching": {"max_batch": 4, "max_wait_ms": 0}}


def _run(
    tmp_path: Path,
    controller: str,
    params: dict[str, Any] | None = None,
    *,
    mode: str = "distributed",
    rate_per_s: float = 200.0,
    alpha: float = 0.7,
    k_min: int = 1,
    extra: dict[str, Any] | None = None,
    name: str = "scenario.yaml",
) -> Any:
    settings = dict(extra or {})
    if controller != "static":
        settings["speculation.adaptive_k"] = {
            "enabled": True,
            "controller": controller,
            "params": params or {},
            "k_min": k_min,
            "k_max": 8,
        }
    path = write_scenario(
        tmp_path,
        mode=mode,
        workload=synthetic(200, rate_per_s, 100, 200),
        alpha=alpha,
        clients=64 if mode == "distributed" else 1,
        extra=settings,
        name=name,
    )
    return run(load_scenario(path))


def _mean_k(result: Any) -> float:
    spec = result.summary["speculation"]
    return spec["drafted_tokens"] / spec["verify_steps"]


@pytest.mark.slow
def test_backpressure_drafts_less_than_static_under_an_overloaded_verify_lane(tmp_path):
    static = _mean_k(_run(tmp_path, "static", extra=OVERLOADED_VERIFY, name="s.yaml"))
    adaptive = _mean_k(_run(tmp_path, "backpressure", extra=OVERLOADED_VERIFY, name="b.yaml"))
    assert static == pytest.approx(4.0, abs=0.1)
    assert adaptive < 2.0
    light = _mean_k(_run(tmp_path, "backpressure", rate_per_s=1.0, name="l.yaml"))
    assert light > 7.0  # with headroom it grows toward k_max


def test_batch_threshold_drafts_k_min_past_its_running_size(tmp_path):
    busy = _mean_k(_run(tmp_path, "batch_threshold", {"max_running": 4}, name="busy.yaml"))
    roomy = _mean_k(_run(tmp_path, "batch_threshold", {"max_running": 1000}, name="roomy.yaml"))
    static = _mean_k(_run(tmp_path, "static", name="static.yaml"))
    assert busy < 1.1
    assert roomy == static


def test_acceptance_feedback_follows_acceptance_and_load(tmp_path):
    def mean_k(alpha: float, rate_per_s: float, name: str) -> float:
        result = _run(
            tmp_path,
            "acceptance_feedback",
            mode="fused",
            alpha=alpha,
            rate_per_s=rate_per_s,
            name=name,
        )
        return _mean_k(result)

    assert mean_k(0.2, 0.5, "poor.yaml") < 1.5  # acceptance below A_lo: shrinks
    assert mean_k(0.95, 0.5, "good.yaml") > 7.0  # calm and accepting: grows
    assert mean_k(0.95, 200.0, "loaded.yaml") < 1.5  # deep queue: shrinks


@pytest.mark.slow
def test_pid_drafts_less_under_load_and_more_with_headroom(tmp_path):
    loaded = _mean_k(_run(tmp_path, "pid", extra=OVERLOADED_VERIFY, name="loaded.yaml"))
    light = _mean_k(_run(tmp_path, "pid", rate_per_s=1.0, name="light.yaml"))
    static = _mean_k(_run(tmp_path, "static", extra=OVERLOADED_VERIFY, name="static.yaml"))
    assert loaded < 2.0 < static < 7.0 < light


@pytest.mark.slow
def test_bandit_drafts_longer_as_acceptance_rises(tmp_path):
    # The fused step costs 22 + 2 k ms: short drafts pay at low acceptance, long ones at high.
    def mean_k(alpha: float, name: str) -> float:
        return _mean_k(
            _run(tmp_path, "bandit", mode="fused", alpha=alpha, rate_per_s=0.5, name=name)
        )

    assert (
        mean_k(0.2, "low.yaml")
        < 1.5
        < mean_k(0.5, "mid.yaml")
        < 3.0
        < 6.5
        < mean_k(0.95, "high.yaml")
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "controller",
    ["backpressure", "batch_threshold", "acceptance_feedback", "pid", "bandit", "goodput"],
)
def test_adaptive_runs_are_reproducible(tmp_path, controller):
    first = _run(tmp_path, controller, extra=OVERLOADED_VERIFY, name="a.yaml")
    second = _run(tmp_path, controller, extra=OVERLOADED_VERIFY, name="b.yaml")
    assert first.requests.equals(second.requests)
    assert first.summary == second.summary


# -- goodput (SmartSpec) ---------------------------------------------------------
class _LinearPredictor:
    """Verify costs ``base + per_k * k`` ms; a plain decode step ``decode`` ms."""

    def __init__(self, base_ms: float, per_k_ms: float, decode_ms: float) -> None:
        self.base_ms = base_ms
        self.per_k_ms = per_k_ms
        self.decode_ms = decode_ms
        self.asked: list[tuple[int, int, float]] = []

    def step_s(self, batch: int, k: int, context_len: float) -> float:
        self.asked.append((batch, k, context_len))
        if k == 0:
            return self.decode_ms / 1000.0
        return (self.base_ms + self.per_k_ms * k) / 1000.0


def _goodput_signals(alpha: float, predictor: Any, **fields: Any) -> KSignals:
    base: dict[str, Any] = {"k_min": 0, "running_batch": 1}
    base.update(fields)
    return signals(request_acceptance=alpha, predictor=predictor, **base)


def test_expected_tokens_matches_the_geometric_series():
    assert expected_tokens(0, 0.5) == 1.0
    assert expected_tokens(3, 0.5) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens(4, 1.0) == 5.0
    assert expected_tokens(2, 0.0) == 1.0


def test_goodput_turns_speculation_off_when_acceptance_collapses():
    # decode 20 ms for 1 token (0.05 token/ms); k = 1: 1.05 tokens in 24 ms (0.044).
    predictor = _LinearPredictor(base_ms=22.0, per_k_ms=2.0, decode_ms=20.0)
    assert Goodput(4).next_k(_goodput_signals(0.05, predictor)) == 0
    # Asked once per k in [k_min, k_max], for the running batch and the request's context.
    assert predictor.asked == [(1, k, 100) for k in range(9)]


def test_goodput_drafts_long_at_batch_one_with_high_acceptance():
    # Objective at alpha 0.9: (1 - 0.9^(k+1)) / 0.1 / (22 + 2k) ms, computed by hand:
    # k=5: 4.6856/32 = 0.14643, k=6: 5.2170/34 = 0.15344, k=7: 5.6953/36 = 0.15820,
    # k=8: 6.1258/38 = 0.16121: rising through k_max, so k_max = 8.
    predictor = _LinearPredictor(base_ms=22.0, per_k_ms=2.0, decode_ms=20.0)
    assert Goodput(4).next_k(_goodput_signals(0.9, predictor)) == 8
    # A steeper verify cost moves the optimum inside the range: with 22 + 8k ms,
    # k=2: 2.71/38 = 0.07132, k=3: 3.439/46 = 0.07476, k=4: 4.0951/54 = 0.07584,
    # k=5: 4.6856/62 = 0.07557.
    steep = _LinearPredictor(base_ms=22.0, per_k_ms=8.0, decode_ms=20.0)
    assert Goodput(4).next_k(_goodput_signals(0.9, steep)) == 4


def test_goodput_objective_is_the_argmax_of_tokens_per_predicted_second():
    predictor = _LinearPredictor(base_ms=10.0, per_k_ms=3.0, decode_ms=9.0)
    for alpha in (0.0, 0.2, 0.5, 0.7, 0.95, 1.0):
        for batch in (1, 7):
            rates = [
                batch * expected_tokens(k, alpha) / predictor.step_s(batch, k, 100)
                for k in range(9)
            ]
            best = max(rates)
            expected = rates.index(best)  # the first (smallest) k of equals
            chosen = Goodput(4).next_k(
                signals(
                    k_min=0,
                    request_acceptance=alpha,
                    running_batch=batch,
                    predictor=predictor,
                )
            )
            assert chosen == expected


def test_goodput_acceptance_falls_back_to_the_window_then_the_prior():
    controller = Goodput(4, GoodputParams(prior_acceptance=0.3))
    assert controller.acceptance(signals(request_acceptance=0.8, window_acceptance=0.1)) == 0.8
    assert controller.acceptance(signals(window_acceptance=0.1)) == 0.1
    assert controller.acceptance(signals()) == 0.3


def test_goodput_breaks_ties_toward_the_smaller_k():
    # alpha 1: k + 1 tokens in (k + 1) / 4 s (exact in binary): every k has goodput 4.
    class Proportional:
        def step_s(self, batch: int, k: int, context_len: float) -> float:
            return (k + 1) * 0.25

    assert Goodput(4).next_k(_goodput_signals(1.0, Proportional(), k_min=2)) == 2
    assert Goodput(4).next_k(_goodput_signals(1.0, Proportional())) == 0


def test_goodput_respects_k_min():
    predictor = _LinearPredictor(base_ms=22.0, per_k_ms=2.0, decode_ms=20.0)
    assert Goodput(4).next_k(_goodput_signals(0.05, predictor, k_min=1)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["distributed", "fused"])
def test_goodput_runs_and_drafts_longer_than_static_with_high_acceptance(tmp_path, mode):
    static = _run(tmp_path, "static", mode=mode, alpha=0.95, rate_per_s=0.5, name="s.yaml")
    goodput = _run(tmp_path, "goodput", mode=mode, alpha=0.95, rate_per_s=0.5, name="g.yaml")
    assert _mean_k(static) == pytest.approx(4.0, abs=0.1)
    assert _mean_k(goodput) > 6.0
    for result in (static, goodput):
        requests = result.requests
        assert (requests["output_tokens"] == requests["generated_tokens"]).all()


@pytest.mark.slow
def test_goodput_turns_speculation_off_in_a_distributed_run_when_acceptance_collapses(tmp_path):
    # alpha 0.05: a k = 1 verify (22 ms + context) yields 1.05 tokens, a plain decode
    # step (20 ms) one: every request speculates only until its estimate collapses.
    goodput = _run(tmp_path, "goodput", alpha=0.05, rate_per_s=0.5, k_min=0, name="collapse.yaml")
    static = _run(tmp_path, "static", alpha=0.05, rate_per_s=0.5, name="static.yaml")
    spec = goodput.summary["speculation"]
    requests = goodput.requests
    zero_rounds = spec["verify_steps"] - spec["drafted_tokens"]  # at most one draft per round
    assert _mean_k(goodput) < 0.1 < 3.9 < _mean_k(static)
    assert zero_rounds > 0.9 * spec["verify_steps"]
    assert (requests["output_tokens"] == requests["generated_tokens"]).all()
    assert (requests["accepted_tokens"] <= requests["drafted_tokens"]).all()
    # A k = 0 round gains exactly one token: rounds = 1 (prefill token) + output - 1 - accepted.
    assert (
        requests["verify_rounds"] + requests["accepted_tokens"] == requests["output_tokens"] - 1
    ).all()
    # Plain decoding beats drafting that is never accepted.
    assert goodput.requests["e2e_ms"].mean() < static.requests["e2e_ms"].mean()


@pytest.mark.parametrize(("rtt_ms", "path"), [(0, "distributed"), (30, "fused")])
def test_goodput_runs_in_hybrid_mode(tmp_path, rtt_ms, path):
    link = {"src": "laptops", "dst": "pool", "rtt_ms": rtt_ms, "bw_mbps": 1e6}
    result = _run(
        tmp_path,
        "goodput",
        mode="hybrid",
        alpha=0.95,
        rate_per_s=0.5,
        extra={
            "speculation.hybrid": {"policy": "rtt_threshold", "params": {"threshold_ms": 20}},
            "network.links": [link],
        },
        name="hybrid.yaml",
    )
    requests = result.requests
    assert (requests["mode"] == path).all()
    assert (requests["output_tokens"] == requests["generated_tokens"]).all()
    assert _mean_k(result) > 6.0


@pytest.mark.parametrize("mode", ["fused", "hybrid"])
def test_k_min_zero_is_refused_outside_distributed(tmp_path, mode):
    with pytest.raises(InputError) as error:
        _run(tmp_path, "goodput", mode=mode, k_min=0, name="zero.yaml")
    assert "speculation.adaptive_k.k_min" in str(error.value)
    assert "distributed" in str(error.value)


def test_k_min_zero_needs_the_verifiers_plain_decode_rows(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(10, 1.0, 100, 20),
        target_phases={
            "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
            "verify": lambda c, b, k: 22.0 + 0.001 * c * b * (k + 1),
        },
        extra={"speculation.adaptive_k": {"enabled": True, "controller": "goodput", "k_min": 0}},
    )
    with pytest.raises(InputError) as error:
        load_scenario(path)
    assert "phase=draft_decode" in str(error.value)


def test_batch_threshold_turns_speculation_off_past_its_size_with_k_min_zero(tmp_path):
    # vLLM's rule: no speculation (k = 0) from max_running requests on.
    busy = _run(tmp_path, "batch_threshold", {"max_running": 4}, k_min=0, name="busy.yaml")
    spec = busy.summary["speculation"]
    assert spec["drafted_tokens"] < 0.1 * spec["verify_steps"]
    requests = busy.requests
    assert (requests["output_tokens"] == requests["generated_tokens"]).all()


def test_k_zero_steps_are_priced_as_plain_decode_steps(tmp_path):
    # Plain decode costs 20 ms at batch 1, a k = 1 verify 24 ms: a request whose
    # rounds all draft nothing takes 20 ms per token after its first, whether the
    # verify lane prices whole batches or microbatches.
    def run_one(k_min: int, extra: dict[str, Any], name: str) -> Any:
        path = write_scenario(
            tmp_path,
            mode="distributed",
            workload=synthetic(1, 1.0, 100, 41),
            target_phases={
                "prefill": lambda c, b, _k: 10.0,
                "draft_decode": lambda c, b, _k: 20.0,
                "verify": lambda c, b, k: 22.0 + 2.0 * k,
            },
            alpha=0.0,
            extra={
                "speculation.adaptive_k": {
                    "enabled": True,
                    "controller": "goodput",
                    "k_min": k_min,
                    "params": {"prior_acceptance": 0.0},
                },
                **extra,
            },
            name=name,
        )
        return run(load_scenario(path)).requests.iloc[0]

    whole = run_one(0, {}, "whole.yaml")
    split = {"scheduler.verify.microbatch": {"max_microbatch": 1, "fallback": "per_request"}}
    grouped = run_one(0, split, "grouped.yaml")
    floor = run_one(1, {}, "floor.yaml")
    for request in (whole, grouped):
        assert request["drafted_tokens"] == 0
        assert request["verify_rounds"] == 40
        assert request["target_energy_j"] == grouped["target_energy_j"]
    assert floor["drafted_tokens"] == 40
    # 40 rounds of a 20 ms decode step (k = 0: nothing drafted on the device) versus
    # a 4 ms draft plus a 24 ms verify (k = 1, nothing accepted).
    assert floor["e2e_ms"] - whole["e2e_ms"] == pytest.approx(40 * 8.0)


@pytest.mark.parametrize(("controller", "built"), [("bandit", False), ("goodput", True)])
def test_the_engine_builds_predictors_only_for_controllers_that_read_them(
    tmp_path, controller, built
):
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(20, 5.0, 100, 30),
        extra={"speculation.adaptive_k": {"enabled": True, "controller": controller}},
    )
    scenario = load_scenario(path)
    engine = Engine(build_runtime(scenario), build_requests(scenario), RandomStreams(1))
    engine.run()
    assert bool(engine.speculation.predictors_built) is built


class _Recorder:
    """A k controller that drafts 0 every other round and records what it is told."""

    signal_window = 1

    def __init__(self) -> None:
        self.seen: list[int] = []

    def next_k(self, signals: KSignals) -> int:
        self.seen.append(signals.k_current)
        return 0 if len(self.seen) % 2 else 2

    def observe(self, outcome: RoundOutcome) -> None:
        assert outcome.accepted <= outcome.k
        if outcome.k == 0:
            assert (outcome.accepted, outcome.gained) == (0, 1)


def test_k_zero_rounds_gain_one_token_and_report_k_current(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(1, 1.0, 100, 12),
        alpha=0.9,
        extra={
            "speculation.adaptive_k": {"enabled": True, "controller": "backpressure", "k_min": 0}
        },
    )
    scenario = load_scenario(path)
    engine = Engine(build_runtime(scenario), build_requests(scenario), RandomStreams(1))
    recorder = _Recorder()
    engine.speculation.controller = recorder
    record = engine.run().records[0]
    assert recorder.seen[0] == 4  # speculation.k before the first round
    assert recorder.seen[1:3] == [0, 2]  # then the k of the previous round, 0 included
    assert record.generated_tokens == 12
    # Odd rounds draft nothing, even ones at most 2; each round gains its accepted tokens
    # plus one (the prefill made the first token).
    assert record.drafted_tokens <= 2 * (record.verify_rounds // 2)
    assert record.accepted_tokens <= record.drafted_tokens
    assert 1 + record.verify_rounds + record.accepted_tokens == 12


class _SignalCheck:
    """A windowed k controller that checks each field of its signals against the engine."""

    signal_window = 4

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.seen: list[KSignals] = []

    def next_k(self, signals: KSignals) -> int:
        replica = self.engine.replicas[signals.replica]
        window = replica.window
        assert window is not None
        assert signals.now_s == self.engine.env.now
        assert (signals.k_min, signals.k_max) == (1, 8)
        assert signals.running_batch == len(replica.holders)
        assert signals.verify_queue_len == replica.waiting(VERIFY)
        for field, value in (
            ("window_acceptance", window.acceptance()),
            ("decode_p95_ms", window.p95_ms()),
            ("queue_delay_ms", window.wait_ms()),
        ):
            got = getattr(signals, field)
            assert got == value or (got != got and value != value), field  # nan: both
        assert signals.predictor is None
        self.seen.append(signals)
        return 3

    def observe(self, outcome: RoundOutcome) -> None:
        pass


def test_windowed_signals_carry_the_replicas_state_in_their_named_fields(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(12, 20.0, 100, 20),
        replicas=2,
        clients=12,
        extra={
            "speculation.adaptive_k": {
                "enabled": True,
                "controller": "acceptance_feedback",
                "k_min": 1,
                "k_max": 8,
            },
        },
    )
    scenario = load_scenario(path)
    engine = Engine(build_runtime(scenario), build_requests(scenario), RandomStreams(1))
    checker = _SignalCheck(engine)
    engine.speculation.controller = checker
    engine.run()
    assert checker.seen
    assert {signals.replica for signals in checker.seen} == {0, 1}
    assert any(signals.decode_p95_ms > 0 for signals in checker.seen)
    assert any(signals.window_acceptance == signals.window_acceptance for signals in checker.seen)
    assert any(signals.request_acceptance == signals.request_acceptance for signals in checker.seen)


# -- a fixed k is asked once --------------------------------------------------------
class _CountingStatic(StaticK):
    """The static controller, counting how often it is asked."""

    def __init__(self, k: int) -> None:
        super().__init__(k)
        self.asked = 0

    def next_k(self, signals: KSignals) -> int:
        self.asked += 1
        return super().next_k(signals)


class _CountingAdaptive(_CountingStatic):
    """The same controller declaring nothing: asked every round."""

    fixed_k = False


@pytest.mark.parametrize(("controller", "asked"), [(_CountingStatic, 1), (_CountingAdaptive, 3)])
def test_a_fixed_k_controller_is_asked_once(controller, asked):
    from types import SimpleNamespace

    import simpy

    from simulator.engine.binding import KControl
    from simulator.engine.request_state import RequestState
    from simulator.engine.speculation import Speculation

    assert StaticK.fixed_k
    env = simpy.Environment()
    replica = SimpleNamespace(index=0, k_sum=0, k_rounds=0, window=None, waiting=lambda kind: 0)
    chosen = controller(12)
    control = KControl(chosen, 12, 0, False, False, bool(chosen.fixed_k))
    speculation = Speculation(env, [replica], control, 1, 8, 0.0, None, None)  # type: ignore[arg-type]
    req = RequestState(0, 0.0, 100, 10, "default", "")
    req.replica = 0
    req.mode = "distributed"
    ks = []
    for generated in (1, 5, 8):
        req.generated = generated
        speculation.choose_k(req)
        ks.append(req.k)
    assert ks == [8, 4, 1]  # k_max, then never past the output's last token
    assert chosen.asked == asked
    assert (replica.k_sum, replica.k_rounds) == (13, 3)
