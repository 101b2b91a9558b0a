"""``scheduler.routing.decode``: the routing policy choosing a prefilled request's decode replica."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simulator import load_scenario, run
from simulator.engine.binding import PolicyBinder
from simulator.rng import RandomStreams
from tests.engine_fixtures import synthetic, write_scenario
from tests.test_disaggregation import SLO, _disaggregated, _issues


def _decode_replicas(tmp_path: Path, decode: dict[str, Any] | None = None) -> Path:
    """Six requests 1 s apart, one prefill replica and two decode replicas."""
    edit: dict[str, Any] = {"hardware_profiles.2.count": 2}
    if decode is not None:
        edit["scheduler.routing.decode"] = decode
    return _disaggregated(tmp_path, workload=synthetic(6, 1.0, 100, 10, slo=SLO), edit=edit)


def test_the_default_decode_router_takes_the_fewest_outstanding_then_the_lowest_index(
    tmp_path: Path,
) -> None:
    result = run(load_scenario(_decode_replicas(tmp_path)))
    assert result.requests["prefill_replica"].tolist() == [0] * 6
    # Each request is done before the next arrives: both decode replicas are idle, so the
    # lower index takes every one.
    assert result.requests["replica"].tolist() == [1] * 6


def test_a_named_routing_policy_chooses_the_decode_replica(tmp_path: Path) -> None:
    result = run(load_scenario(_decode_replicas(tmp_path, {"policy": "round_robin"})))
    assert result.requests["replica"].tolist() == [1, 2, 1, 2, 1, 2]


def test_power_of_two_on_decode_replicas_draws_from_its_own_stream(tmp_path: Path) -> None:
    scenario = load_scenario(_decode_replicas(tmp_path, {"policy": "power_of_two"}))
    assert scenario.scheduler.decode_routing is not None
    routing = PolicyBinder(RandomStreams(scenario.seed)).routing(scenario.scheduler)
    drawn = routing.decode_router._rng.integers(1 << 30, size=4)
    expected = RandomStreams(scenario.seed).get("decode_routing").integers(1 << 30, size=4)
    first = RandomStreams(scenario.seed).get("routing").integers(1 << 30, size=4)
    assert np.array_equal(drawn, expected) and not np.array_equal(drawn, first)
    a = run(load_scenario(_decode_replicas(tmp_path, {"policy": "power_of_two"})))
    b = run(scenario)
    assert a.requests.equals(b.requests)
    assert set(a.requests["replica"]) <= {1, 2}


def test_a_colocated_fleet_refuses_a_decode_router(tmp_path: Path) -> None:
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(1, 1.0, 100, 10, slo=SLO),
        extra={"scheduler": {"routing": {"decode": {"policy": "round_robin"}}}},
    )
    lines = _issues(path)
    assert any(
        "scheduler.routing.decode.policy" in line
        and "round_robin" in line
        and "only a disaggregated fleet hands requests to decode replicas" in line
        for line in lines
    ), "\n".join(lines)


@pytest.mark.parametrize(
    ("edit", "key", "value", "allowed"),
    [
        (
            {"scheduler.routing.policy": "kv_transfer_aware"},
            "scheduler.routing.policy",
            "kv_transfer_aware",
            "a router of new requests",
        ),
        (
            {"scheduler.routing.decode": {"policy": "cache_aware"}},
            "scheduler.routing.decode.policy",
            "cache_aware",
            "a router that does not read prefix caches",
        ),
        (
            {"scheduler.routing.decode": {"policy": "no_such_router"}},
            "scheduler.routing.decode.policy",
            "no_such_router",
            "kv_transfer_aware",
        ),
    ],
)
def test_routers_that_cannot_choose_there_are_refused(
    tmp_path: Path, edit: dict[str, Any], key: str, value: str, allowed: str
) -> None:
    lines = _issues(_disaggregated(tmp_path, edit=edit))
    matching = [line for line in lines if key in line and value in line]
    assert matching and any(allowed in line for line in matching), "\n".join(lines)
