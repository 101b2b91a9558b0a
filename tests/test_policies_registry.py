from dataclasses import dataclass
from typing import ClassVar

import pytest

from policies import UnknownPolicyError, policy_enums, registry
from policies.batching import BatchLimits, FcfsVerify
from policies.hybrid import RttThreshold, RttThresholdParams
from policies.k_control import StaticK
from policies.registry import PolicyRegistry, PolicyRegistryError
from policies.routing import LeastOutstanding, RoundRobin
from policies.views import KSignals, ModeQuery, QueuedItem, ReplicaLoad, RoutingQuery


def test_every_family_has_its_default_policy():
    enums = policy_enums()
    assert enums["routing"] == [
        "cache_aware",
        "kv_aware",
        "kv_transfer_aware",
        "least_outstanding",
        "network_aware",
        "power_of_two",
        "round_robin",
    ]
    assert "fcfs" in enums["verify_batching"]
    assert "static" in enums["k_control"]
    assert "admit_all" in enums["admission"]
    assert enums["hybrid_mode"] == ["fused_fraction", "predicted_latency", "rtt_threshold"]
    assert "iteration_level" in enums["draft_scheduling"]


def test_unknown_name_lists_valid_ones():
    with pytest.raises(
        UnknownPolicyError,
        match=(
            "valid: cache_aware, kv_aware, kv_transfer_aware, least_outstanding, network_aware, "
            "power_of_two, round_robin"
        ),
    ):
        registry("routing").get("random_walk")


def test_duplicate_registration_rejected():
    reg: PolicyRegistry[type] = PolicyRegistry("demo", "demo family")

    @dataclass(frozen=True)
    class P:
        pass

    class A:
        name: ClassVar[str] = "x"
        Params = P
        params_schema: ClassVar[dict] = {}

    class B(A):
        pass

    reg.register(A)
    with pytest.raises(PolicyRegistryError, match="registered twice"):
        reg.register(B)


def test_registration_requires_params_dataclass():
    reg: PolicyRegistry[type] = PolicyRegistry("demo2", "demo family")

    class NoParams:
        name: ClassVar[str] = "y"

    with pytest.raises(PolicyRegistryError, match="Params"):
        reg.register(NoParams)


def _items(times):
    return [QueuedItem(i, t, float("inf"), 100, 1) for i, t in enumerate(times)]


def test_size_timeout_waits_then_fires():
    batcher = FcfsVerify(BatchLimits(max_batch=3, max_wait_ms=10))
    choice = batcher.select(_items([1.0, 1.002]), now_s=1.003)
    assert choice.take == ()
    assert choice.wake_at_s == pytest.approx(1.010)
    assert batcher.select(_items([1.0, 1.002]), now_s=1.010).take == (0, 1)


def test_size_timeout_full_batch_goes_at_once_oldest_first():
    batcher = FcfsVerify(BatchLimits(max_batch=2, max_wait_ms=1000))
    assert batcher.select(_items([5.0, 3.0, 4.0]), now_s=5.0).take == (1, 2)


def test_token_budget_never_starves_a_large_item():
    batcher = FcfsVerify(BatchLimits(max_batch=8, max_wait_ms=0, max_tokens=100))
    items = [QueuedItem(0, 0.0, 1.0, 10, 500), QueuedItem(1, 0.1, 1.0, 10, 50)]
    assert batcher.select(items, now_s=1.0).take == (0,)
    items = [QueuedItem(0, 0.0, 1.0, 10, 60), QueuedItem(1, 0.1, 1.0, 10, 50)]
    assert batcher.select(items, now_s=1.0).take == (0,)


def test_routers():
    loads = [ReplicaLoad(0, 5, 0.0), ReplicaLoad(1, 2, 0.0), ReplicaLoad(2, 2, 0.0)]
    query = RoutingQuery(0, "", 10)
    rr = RoundRobin()
    assert [rr.route(query, loads) for _ in range(4)] == [0, 1, 2, 0]
    assert LeastOutstanding().route(query, loads) == 1


def test_static_k_and_rtt_threshold():
    signals = KSignals(0.0, 4, 1, 3, float("nan"), 0, 100)
    assert StaticK(5).next_k(signals) == 3
    policy = RttThreshold(RttThresholdParams(threshold_ms=50))
    assert policy.choose(ModeQuery("p", 80, 10, 0)) == "fused"
    assert policy.choose(ModeQuery("p", 50, 10, 0)) == "distributed"
