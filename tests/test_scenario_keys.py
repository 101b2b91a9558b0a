"""Scenario keys reach the objects the engine reads."""

from __future__ import annotations

import pytest
import yaml

from simulator.errors import InputError
from simulator.runner import run
from simulator.scenario import load_scenario
from simulator.scenario.model import MODES, MicrobatchSpec
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
    assert scheduler.verify.microbatch == MicrobatchSpec(8, "per_request", 2.0)
    assert scheduler.prefill.microbatch is None
    assert scheduler.draft.microbatch is None
    verify = scenario_schema()["properties"]["scheduler"]["properties"]["verify"]
    micro = verify["properties"]["microbatch"]["properties"]
    assert micro["max_microbatch"]["default"] == 256
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


@pytest.mark.slow
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


def _with_availability(path, index: int, availability) -> None:
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][index]["availability"] = availability
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def test_a_scenario_availability_window_delays_the_draft_device(tmp_path):
    """The laptop profile is always available; the scenario opens it only from t = 5 s."""
    path = write_scenario(tmp_path, mode="distributed", workload=synthetic(1, 1.0, 100, 10))
    always = run(load_scenario(path)).requests.iloc[0]
    assert always["e2e_ms"] < 1000

    window = {"kind": "windows", "period_s": 1000, "windows": [{"start_s": 5, "end_s": 1000}]}
    _with_availability(path, 0, window)
    scenario = load_scenario(path)
    assert scenario.device("laptops").availability.next_available_s(0.0) == 5.0
    assert scenario.device("laptops").profile.availability.kind == "always"
    delayed = run(scenario).requests.iloc[0]
    assert delayed["outcome"] == "completed"
    # The target's first token does not wait for the device; the drafting does.
    assert delayed["ttft_ms"] == pytest.approx(always["ttft_ms"])
    assert delayed["e2e_ms"] >= 5000
    assert delayed["e2e_ms"] - always["e2e_ms"] == pytest.approx(5000, abs=always["e2e_ms"])


def test_loading_scenarios_leaves_the_shared_schema_as_built(tmp_path):
    """Loading reads the process's one schema without a copy: it must never change it."""
    import json

    from simulator.scenario.schema import _assembled, shared_scenario_schema

    def digest(schema):
        return json.dumps(schema, sort_keys=True, default=str)

    built = digest(_assembled.__wrapped__(True))
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(2, 1.0, 100, 10),
        extra={"scheduler.verify.microbatch": {"max_microbatch": 8}},
    )
    load_scenario(path)
    load_scenario(path, overrides=["scheduler.verify.policy=edf", "speculation.k=3"])
    load_scenario("scenarios/examples/design_example.yaml")
    with pytest.raises(InputError):
        load_scenario(path, overrides=["speculation.k=-1"])
    assert digest(shared_scenario_schema()) == built
    copy = scenario_schema()
    copy["properties"].clear()  # a copy may be changed; the shared schema is not
    assert digest(shared_scenario_schema()) == built
