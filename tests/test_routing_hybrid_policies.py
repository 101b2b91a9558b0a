"""Routing policies kv_aware, network_aware, power_of_two; hybrid policies predicted_latency, fused_fraction."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from policies.hybrid import FusedFraction, FusedFractionParams, PredictedLatency
from policies.routing import KvAware, NetworkAware, PowerOfTwo
from policies.views import ModeQuery, ReplicaLoad, RoutingQuery
from simulator import load_scenario, run
from simulator.rng import RandomStreams
from tests.engine_fixtures import PROFILES, synthetic, write_scenario

QUERY = RoutingQuery(0, "laptops", 100)


def _load(index: int, **fields: Any) -> ReplicaLoad:
    base: dict[str, Any] = {"outstanding_requests": 0, "kv_free_mb": 1000.0}
    base.update(fields)
    return ReplicaLoad(index, **base)


# -- crafted decisions -----------------------------------------------------------
def test_kv_aware_picks_the_most_kv_left_after_the_request():
    loads = [
        _load(0, kv_free_mb=500.0, kv_need_mb=10.0),
        _load(1, kv_free_mb=900.0, kv_need_mb=10.0),
        _load(2, kv_free_mb=700.0, kv_need_mb=10.0),
    ]
    assert KvAware().route(QUERY, loads) == 1
    # A pool whose model needs more KV per token counts that: 900 - 300 < 700 - 10.
    loads[1] = _load(1, kv_free_mb=900.0, kv_need_mb=300.0)
    assert KvAware().route(QUERY, loads) == 2
    # Equal KV left: fewer outstanding requests first, then the lower index.
    tied = [
        _load(0, kv_free_mb=800.0, outstanding_requests=3),
        _load(1, kv_free_mb=800.0, outstanding_requests=1),
        _load(2, kv_free_mb=800.0, outstanding_requests=1),
    ]
    assert KvAware().route(QUERY, tied) == 1


def test_network_aware_prefers_the_near_pool_until_its_queue_outweighs_the_rtt():
    near = _load(0, pool="near", link_rtt_ms=5.0, predicted_queue_s=0.0)
    far = _load(1, pool="far", link_rtt_ms=50.0, predicted_queue_s=0.0)
    policy = NetworkAware()
    assert policy.route(QUERY, [near, far]) == 0
    # 5 ms + 40 ms of queue < 50 ms: still near; 5 ms + 50 ms > 50 ms: far.
    assert policy.route(QUERY, [_load(0, link_rtt_ms=5.0, predicted_queue_s=0.040), far]) == 0
    assert policy.route(QUERY, [_load(0, link_rtt_ms=5.0, predicted_queue_s=0.050), far]) == 1
    # Equal scores: fewer outstanding requests, then the lower index.
    a = _load(0, link_rtt_ms=5.0, outstanding_requests=2)
    b = _load(1, link_rtt_ms=5.0, outstanding_requests=1)
    assert policy.route(QUERY, [a, b]) == 1


def _power_of_two(seed: int) -> PowerOfTwo:
    return PowerOfTwo(rng=RandomStreams(seed).get("routing"))


def test_power_of_two_samples_two_distinct_replicas_uniformly():
    draws = 12_000
    # All equally loaded: the lower index of a uniform pair wins, so replica i
    # of n is chosen with probability 2 (n - 1 - i) / (n (n - 1)).
    equal = [_load(i) for i in range(4)]
    policy = _power_of_two(7)
    counts = Counter(policy.route(QUERY, equal) for _ in range(draws))
    for i, expected in enumerate((3 / 6, 2 / 6, 1 / 6, 0.0)):
        assert counts[i] / draws == pytest.approx(expected, abs=0.015)
    # One idle replica among busy ones is chosen exactly when it is drawn: 2 / n.
    loaded = [_load(i, outstanding_requests=10) for i in range(4)]
    loaded[2] = _load(2, outstanding_requests=0)
    counts = Counter(policy.route(QUERY, loaded) for _ in range(draws))
    assert counts[2] / draws == pytest.approx(0.5, abs=0.015)
    # The two are distinct: the most loaded of two replicas is never chosen.
    pair = [_load(0, outstanding_requests=5), _load(1, outstanding_requests=1)]
    assert {policy.route(QUERY, pair) for _ in range(200)} == {1}
    assert policy.route(QUERY, [_load(3)]) == 3


def test_power_of_two_is_deterministic_for_a_seed():
    loads = [_load(i, outstanding_requests=i % 3) for i in range(6)]
    one = _power_of_two(1)
    two = _power_of_two(1)
    other = _power_of_two(2)
    seq_one = [one.route(QUERY, loads) for _ in range(50)]
    seq_two = [two.route(QUERY, loads) for _ in range(50)]
    seq_other = [other.route(QUERY, loads) for _ in range(50)]
    assert seq_one == seq_two
    assert seq_one != seq_other


def _mode_query(rtt_ms: float) -> ModeQuery:
    return ModeQuery(
        "laptops",
        rtt_ms,
        100.0,
        0,
        k=4,
        draft_s=0.010,
        verify_s=0.020,
        transfer_s=0.001,
        distributed_tokens=3.0,
        fused_step_s=0.045,
        fused_tokens=2.5,
    )


def test_predicted_latency_by_hand():
    policy = PredictedLatency()
    # Fused: 45 ms / 2.5 = 18 ms per token. Distributed: (10 + rtt + 1 + 20) / 3 ms.
    assert policy.per_token_s(_mode_query(5.0)) == pytest.approx((0.012, 0.018))
    assert policy.choose(_mode_query(5.0)) == "distributed"
    assert policy.per_token_s(_mode_query(40.0)) == pytest.approx((0.071 / 3, 0.018))
    assert policy.choose(_mode_query(40.0)) == "fused"
    # The crossing is at rtt = 3 × 18 - 31 = 23 ms; a tie stays distributed.
    assert policy.choose(_mode_query(22.9)) == "distributed"
    assert policy.choose(_mode_query(23.1)) == "fused"


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.25, 0.3, 1 / 3, 0.7, 1.0])
def test_fused_fraction_realises_its_share_evenly(fraction):
    policy = FusedFraction(FusedFractionParams(fraction=fraction))
    query = _mode_query(0.0)
    choices = [policy.choose(query) == "fused" for _ in range(3000)]
    # After every prefix of n requests, the fused count is within one of n × f.
    fused = 0
    for n, is_fused in enumerate(choices, start=1):
        fused += is_fused
        assert abs(fused - n * fraction) < 1.0 + 1e-9
    assert sum(choices) == pytest.approx(3000 * fraction, abs=1.0)


# -- in the engine -------------------------------------------------------------------
def _write_trace(tmp_path: Path, rows: list[str], header: str) -> dict[str, Any]:
    path = tmp_path / "trace.csv"
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return {"source": f"trace://{path}", "slo": {"ttft_ms": 1000, "tpot_ms": 100}}


def _requests(path: Path) -> pd.DataFrame:
    return run(load_scenario(path)).requests.sort_values("request_id").reset_index(drop=True)


def _twice_identical(path: Path) -> pd.DataFrame:
    first = _requests(path)
    pd.testing.assert_frame_equal(first, _requests(path))
    return first


def _routing(policy: str) -> dict[str, Any]:
    return {"scheduler.routing": {"policy": policy}}


def test_kv_aware_steers_away_from_the_replica_holding_a_long_context(tmp_path):
    rows = ["0.0,20000,400"] + [f"{0.5 + 0.1 * i:.1f},100,20" for i in range(6)]
    workload = _write_trace(tmp_path, rows, "arrival_s,prompt_tokens,output_tokens")
    replicas: dict[str, list[int]] = {}
    for policy in ("round_robin", "kv_aware"):
        out = tmp_path / policy
        out.mkdir()
        path = write_scenario(
            out, mode="none", workload=workload, replicas=2, extra=_routing(policy)
        )
        frame = _twice_identical(path)
        assert (frame["outcome"] == "completed").all()
        replicas[policy] = frame["replica"].tolist()
    assert replicas["round_robin"] == [0, 1, 0, 1, 0, 1, 0]
    # Replica 0 holds the 20,000-token context throughout: every short request goes to 1.
    assert replicas["kv_aware"] == [0, 1, 1, 1, 1, 1, 1]


def _two_pools(tmp_path: Path, policy: str, workload: dict[str, Any]) -> Path:
    """Two one-replica target pools: ``near`` (2 ms from the laptops) and ``far`` (30 ms)."""
    tmp_path.mkdir()
    path = write_scenario(tmp_path, mode="none", workload=workload, extra=_routing(policy))
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"] = [
        document["hardware_profiles"][0],
        # engine none: the fixture's LUT rows are the steps the hand computations expect
        {
            "id": "near",
            "type": "target",
            "profile": str(PROFILES / "a100-tp1.yaml"),
            "count": 1,
            "engine": "none",
        },
        {
            "id": "far",
            "type": "target",
            "profile": str(PROFILES / "a100-tp1.yaml"),
            "count": 1,
            "engine": "none",
        },
    ]
    document["network"]["links"] = [
        {"src": "laptops", "dst": "near", "rtt_ms": 2, "bw_mbps": 1000},
        {"src": "laptops", "dst": "far", "rtt_ms": 30, "bw_mbps": 1000},
    ]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_network_aware_uses_the_near_pool_and_spills_to_the_far_one_under_a_burst(tmp_path):
    # Light load: every request finds the near pool's queue empty.
    light = synthetic(20, 2.0, 100, 10)
    pools = {}
    for policy in ("round_robin", "network_aware"):
        frame = _twice_identical(_two_pools(tmp_path / f"light_{policy}", policy, light))
        pools[policy] = Counter(frame["replica"])
    assert pools["round_robin"] == Counter({0: 10, 1: 10})
    assert pools["network_aware"] == Counter({0: 20})
    # A burst of 4,000-token prompts at one instant: each prefill takes
    # 10 + 0.01 × 4000 = 50 ms, so the near queue soon outweighs the 28 ms of extra RTT.
    rows = ["0.0,4000,5"] * 6
    burst = _write_trace(tmp_path, rows, "arrival_s,prompt_tokens,output_tokens")
    frame = _twice_identical(_two_pools(tmp_path / "burst", "network_aware", burst))
    # near 0 | far 0 (2 < 30) ; near 50+2 > far 30 ; near 52 < far 80 ; near 102 > far 80;
    # near 102 < far 130 ; near 152 > far 130.
    assert frame["replica"].tolist() == [0, 1, 0, 1, 0, 1]


def test_power_of_two_changes_the_assignment_and_follows_the_seed(tmp_path):
    workload = synthetic(60, 50.0, 100, 20)
    assignments = {}
    for name, policy, seed in (
        ("rr", "round_robin", 1),
        ("p2", "power_of_two", 1),
        ("p2_seed2", "power_of_two", 2),
    ):
        out = tmp_path / name
        out.mkdir()
        path = write_scenario(
            out,
            mode="none",
            workload=workload,
            replicas=4,
            extra={**_routing(policy), "seed": seed},
        )
        frame = _twice_identical(path)
        assert (frame["outcome"] == "completed").all()
        assignments[name] = frame["replica"].tolist()
    assert assignments["rr"] == [i % 4 for i in range(60)]
    assert assignments["p2"] != assignments["rr"]
    assert set(assignments["p2"]) == {0, 1, 2, 3}
    assert assignments["p2_seed2"] != assignments["p2"]


def _hybrid(tmp_path: Path, hybrid: dict[str, Any], workload: dict[str, Any]) -> Path:
    """Clients ``near`` (11 ms) and ``far`` (13 ms) around the 12 ms crossing of predicted_latency.

    At a 200-token context and k = 4: a distributed round is 4 × 4 ms of
    drafting + the RTT + 22 + 0.001 × 200 × 5 = 23 ms of verify (transfers are
    negligible at 10^6 Mbps): 39 ms + RTT; a fused round is 50 + 0.001 × 200 ×
    5 = 51 ms. One acceptance curve serves both, so the tokens per round cancel.
    """
    tmp_path.mkdir()
    path = write_scenario(
        tmp_path,
        mode="hybrid",
        workload=workload,
        fused_phases={
            "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
            "fused_decode": lambda c, b, k: 50.0 + 0.001 * c * b * (k + 1),
        },
        extra={"speculation.hybrid": hybrid},
    )
    document = yaml.safe_load(path.read_text())
    laptops = document["hardware_profiles"][0]
    document["hardware_profiles"] = [
        dict(laptops, id="near"),
        dict(laptops, id="far"),
        document["hardware_profiles"][1],
    ]
    document["network"]["links"] = [
        {"src": "near", "dst": "pool", "rtt_ms": 11, "bw_mbps": 1e6},
        {"src": "far", "dst": "pool", "rtt_ms": 13, "bw_mbps": 1e6},
    ]
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _origin_trace(tmp_path: Path, count: int) -> dict[str, Any]:
    tmp_path.mkdir(exist_ok=True)
    rows = [f"{0.5 * i:.1f},200,20,{'near' if i % 2 == 0 else 'far'}" for i in range(count)]
    return _write_trace(tmp_path, rows, "arrival_s,prompt_tokens,output_tokens,origin")


def test_predicted_latency_sends_the_far_clients_fused(tmp_path):
    workload = _origin_trace(tmp_path / "trace", 10)
    threshold = _twice_identical(
        _hybrid(
            tmp_path / "threshold",
            {"policy": "rtt_threshold", "params": {"threshold_ms": 100}},
            workload,
        )
    )
    assert (threshold["mode"] == "distributed").all()
    predicted = _twice_identical(
        _hybrid(tmp_path / "predicted", {"policy": "predicted_latency"}, workload)
    )
    assert (predicted["outcome"] == "completed").all()
    modes = predicted.groupby("origin")["mode"].unique()
    assert list(modes["near"]) == ["distributed"]
    assert list(modes["far"]) == ["fused"]


@pytest.mark.slow
@pytest.mark.parametrize(("fraction", "fused"), [(0.0, 0), (0.25, 5), (0.5, 10), (1.0, 20)])
def test_fused_fraction_in_a_run(tmp_path, fraction, fused):
    workload = _origin_trace(tmp_path / "trace", 20)
    frame = _twice_identical(
        _hybrid(
            tmp_path / "run",
            {"policy": "fused_fraction", "params": {"fraction": fraction}},
            workload,
        )
    )
    assert (frame["outcome"] == "completed").all()
    assert int((frame["mode"] == "fused").sum()) == fused
    if fraction == 0.25:
        # Every fourth request, in arrival order.
        assert frame.index[frame["mode"] == "fused"].tolist() == [3, 7, 11, 15, 19]


def test_the_engine_fills_the_detailed_replica_loads(tmp_path, monkeypatch):
    seen: list[list[ReplicaLoad]] = []
    original = NetworkAware.route

    def recording(self, query, replicas):
        seen.append(list(replicas))
        return original(self, query, replicas)

    monkeypatch.setattr(NetworkAware, "route", recording)
    rows = ["0.0,4000,5", "0.0,100,10"]
    workload = _write_trace(tmp_path, rows, "arrival_s,prompt_tokens,output_tokens")
    _requests(_two_pools(tmp_path / "run", "network_aware", workload))
    first, second = seen
    assert [(r.index, r.pool, r.link_rtt_ms, r.link_bw_mbps) for r in first] == [
        (0, "near", 2.0, 1000.0),
        (1, "far", 30.0, 1000.0),
    ]
    # 80 GB less the fixture's 1,000 MB of weights; 0.5 MB of KV per token of prompt + output.
    assert {r.kv_capacity_mb for r in first} == {80 * 1024.0 - 1000.0}
    assert [r.kv_need_mb for r in first] == [2002.5, 2002.5]
    assert [r.kv_need_mb for r in second] == [55.0, 55.0]
    # The first prompt's batch-1 prefill (10 + 0.01 × 4000 = 50 ms) queues on the near replica.
    assert [r.predicted_queue_s for r in first] == [0.0, 0.0]
    assert [r.predicted_queue_s for r in second] == [pytest.approx(0.050), 0.0]


def test_the_engine_fills_the_predicted_round(tmp_path, monkeypatch):
    seen: list[ModeQuery] = []
    original = PredictedLatency.choose

    def recording(self, query):
        seen.append(query)
        return original(self, query)

    monkeypatch.setattr(PredictedLatency, "choose", recording)
    workload = _origin_trace(tmp_path / "trace", 2)
    _requests(_hybrid(tmp_path / "run", {"policy": "predicted_latency"}, workload))
    near, far = seen
    tokens = (1 - 0.7**5) / (1 - 0.7)  # i.i.d. acceptance 0.7, k = 4
    assert (near.link_rtt_ms, far.link_rtt_ms) == (11.0, 13.0)
    for query in (near, far):
        assert query.k == 4
        assert query.draft_s == pytest.approx(4 * 0.004)
        assert query.verify_s == pytest.approx(0.022 + 0.001 * 200 * 5 / 1000)
        assert query.fused_step_s == pytest.approx(0.050 + 0.001 * 200 * 5 / 1000)
        assert query.distributed_tokens == pytest.approx(tokens)
        assert query.fused_tokens == pytest.approx(tokens)
        # 4 bytes per drafted token up, 4 per expected token down, at 10^6 Mbps.
        assert query.transfer_s == pytest.approx((4 * 4 + 4 * tokens) * 8 / 1e12)
