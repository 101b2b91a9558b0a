"""Scenario keys reach the objects the engine reads."""

from __future__ import annotations

from simulator.scenario import load_scenario
from simulator.scenario.model import DEFAULT_MAX_MICROBATCH
from simulator.scenario.schema import scenario_schema
from tests.engine_fixtures import synthetic, write_scenario


def test_only_the_verify_lane_has_microbatch_settings(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(2, 1.0, 100, 10),
        extra={"scheduler.verify.microbatch": {"max_microbatch": 8, "fallback": "per_request"}},
    )
    scheduler = load_scenario(path).scheduler
    assert (scheduler.verify.max_microbatch, scheduler.verify.fallback) == (8, "per_request")
    assert scheduler.prefill.max_microbatch == scheduler.draft.max_microbatch
    verify = scenario_schema()["properties"]["scheduler"]["properties"]["verify"]
    micro = verify["properties"]["microbatch"]["properties"]
    assert micro["max_microbatch"]["default"] == DEFAULT_MAX_MICROBATCH
    assert micro["fallback"]["default"] == "none"
