"""Scenario keys reach the objects the engine reads."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.runner import run
from simulator.scenario import load_scenario
from simulator.scenario.model import DEFAULT_MAX_MICROBATCH, MODES
from simulator.scenario.schema import scenario_schema
from tests.engine_fixtures import constant, synthetic, write_lut, write_scenario


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


def _grids_from(tmp_path, context_min: int, batch_max: int) -> None:
    """Rewrite the fixture's three LUTs with contexts from ``context_min`` and batches to ``batch_max``."""
    axes = {"contexts": (context_min, 131072), "batches": (1, batch_max)}
    write_lut(
        tmp_path / "target.csv",
        "target-model",
        "a100-sxm4-80gb",
        {p: constant(10.0) for p in ("prefill", "draft_decode", "verify")},
        **axes,
    )
    write_lut(
        tmp_path / "draft.csv",
        "draft-model",
        "rtx-4050-laptop",
        {p: constant(2.0) for p in ("prefill", "draft_decode")},
        **axes,
    )
    write_lut(
        tmp_path / "fused.csv",
        "fused-model",
        "a100-sxm4-80gb",
        {p: constant(12.0) for p in ("prefill", "fused_decode")},
        **axes,
    )


@pytest.mark.parametrize("mode", MODES)
def test_lut_grids_that_just_cover_the_run_validate_and_run_under_raise(tmp_path, mode):
    """Prompts of 100 tokens, grids from context 100, six requests and batches up to six."""
    hybrid = {"speculation.hybrid": {"params": {"threshold_ms": 5}}} if mode == "hybrid" else {}
    path = write_scenario(tmp_path, mode=mode, workload=synthetic(6, 50.0, 100, 12), extra=hybrid)
    _grids_from(tmp_path, 100, 6)
    result = run(load_scenario(path))
    assert set(result.requests["outcome"]) == {"completed"}

    _grids_from(tmp_path, 101, 6)
    with pytest.raises(InputError) as refused:
        load_scenario(path)
    assert {i.key_path for i in refused.value.issues} == {"workload.synthetic.prompt_tokens"}

    _grids_from(tmp_path, 100, 5)
    with pytest.raises(InputError) as refused:
        load_scenario(path)
    assert "scheduler.verify.batching.max_batch" in {i.key_path for i in refused.value.issues}
