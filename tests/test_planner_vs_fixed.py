"""The planner-against-fixed comparison: fixed runs set the keys the candidates stand for."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.planner.candidates import Candidate
from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent


pvf = load_script(ROOT / "scripts" / "planner_vs_fixed.py", "planner_vs_fixed")
DOCUMENT = {
    "hardware_profiles": [
        {"id": "phones", "type": "draft", "count": 100},
        {"id": "a", "type": "target", "count": 1},
        {"id": "b", "type": "target", "count": 2},
    ]
}


def test_a_fixed_configuration_sets_every_target_pool_and_turns_the_planner_off() -> None:
    candidate = Candidate((("verify_replicas", 3.0), ("k", 2.0), ("max_batch", 16.0)))
    assert pvf.fixed_overrides(DOCUMENT, candidate) == [
        "planner={enabled: false}",
        "hardware_profiles[1].count=3",
        "hardware_profiles[2].count=3",
        "speculation.k=2",
        "scheduler.verify.batching.max_batch=16",
    ]


def test_a_key_without_a_fixed_equivalent_is_refused_naming_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="k_controller has no fixed equivalent"):
        pvf.fixed_overrides(DOCUMENT, Candidate((("k_controller", "static"),)))


def test_a_fixed_split_sets_the_pools_of_each_role() -> None:
    document = {
        "hardware_profiles": [
            {"id": "p", "type": "target", "role": "prefill", "count": 3},
            {"id": "d", "type": "target", "role": "decode", "count": 1},
        ]
    }
    candidate = Candidate((("prefill_replicas", 1.0), ("decode_replicas", 3.0)))
    assert pvf.fixed_overrides(document, candidate) == [
        "planner={enabled: false}",
        "hardware_profiles[0].count=1",
        "hardware_profiles[1].count=3",
    ]
    roles = {"p": "prefill", "d": "decode"}
    assert pvf._split_replicas("prefill_replicas=1 decode_replicas=3", "p=3 d=1", roles) == 4
    assert pvf._split_replicas("decode_replicas=2", "p=3 d=1", roles) == 5


def test_the_serving_replicas_a_chosen_candidate_sets() -> None:
    assert pvf._replicas("verify_replicas=2 k=4", 2, 7) == 4
    assert pvf._replicas("k=4", 2, 7) == 7


@pytest.mark.slow
def test_the_comparison_is_the_same_in_this_process_and_on_a_pool() -> None:
    """Windows and fixed runs on two workers give every figure the serial comparison gives."""
    scenario = ROOT / "scenarios" / "disaggregation" / "disaggregated_planner.yaml"
    # Loaded again under its name, as another test module does: the pool's results still come back.
    load_script(ROOT / "scripts" / "planner_vs_fixed.py", "planner_vs_fixed")
    serial = pvf.compare(scenario, workers=1)
    pooled = pvf.compare(scenario, workers=2)
    assert [o.label for o in pooled] == [o.label for o in serial]
    assert [o.label for o in serial[1:]] == [
        f"prefill_replicas={p} decode_replicas={d}" for p in (1, 2) for d in (1, 2, 3)
    ]
    for mine, theirs in zip(pooled, serial, strict=True):
        assert (mine.attainment, mine.gpu_hours, mine.goodput_per_gpu_s) == (
            theirs.attainment,
            theirs.gpu_hours,
            theirs.goodput_per_gpu_s,
        )
    assert pooled[0].result.planner_log.equals(serial[0].result.planner_log)
