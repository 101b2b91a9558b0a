"""Bad device profiles: every problem is reported with its key path, value and what is allowed."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from simulator.devices import Availability, AvailabilityWindow, load_device_profile
from simulator.errors import InputError

DRAFT: dict[str, Any] = {
    "id": "phone",
    "name": "A phone",
    "vendor": "Acme",
    "role": "draft",
    "hardware": "galaxy-s25",
    "compute": {
        "max_concurrent_requests": 1,
        "thermal": {"throttle_factor": 0.5, "throttle_after_s": 120},
    },
    "memory": {"device_memory_gb": 8},
    "network": {"default_link": "wifi"},
    "sources": {
        "compute.max_concurrent_requests": "configuration: one request at a time",
        "compute.thermal.throttle_factor": "measured steady / peak",
        "compute.thermal.throttle_after_s": "measured onset",
        "memory.device_memory_gb": "device name",
    },
}

TARGET: dict[str, Any] = {
    "id": "gpu-box",
    "name": "A replica",
    "vendor": "Acme",
    "role": "target",
    "hardware": "a100-sxm4-80gb",
    "compute": {
        "tensor_parallel": 2,
        "pipeline_parallel": 2,
        "gpus_per_replica": 4,
        "parallelism_limits": {"max_tensor_parallel": 8},
    },
    "memory": {"device_memory_gb": 320, "gpu_memory_gb": 80},
    "network": {"default_link": "datacenter"},
    "energy": {"active_power_w": 800, "active_power_w_per_gpu": 200},
    "calibration": [{"model": "m", "quant": "bf16", "decode_tok_s": 100.0, "source": "row 3"}],
    "sources": {
        "compute.tensor_parallel": "configuration",
        "compute.pipeline_parallel": "configuration",
        "compute.gpus_per_replica": "tp x pp",
        "compute.parallelism_limits.max_tensor_parallel": "node size",
        "memory.device_memory_gb": "80 x 4",
        "memory.gpu_memory_gb": "device name",
        "energy.active_power_w": "200 x 4",
        "energy.active_power_w_per_gpu": "median power",
    },
}


def write(tmp_path: Path, document: Any, name: str | None = None) -> Path:
    stem = name or (document["id"] if isinstance(document, dict) else "profile")
    path = tmp_path / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def issues_of(path: Path) -> dict[str, Any]:
    with pytest.raises(InputError) as caught:
        load_device_profile(path)
    for issue in caught.value.issues:
        assert issue.file == str(path)
    return {issue.key_path: issue for issue in caught.value.issues}


def test_valid_examples_load_with_defaults(tmp_path):
    draft = load_device_profile(write(tmp_path, DRAFT))
    assert draft.is_draft and not draft.is_target
    assert draft.compute.tensor_parallel == 1 and draft.gpus_per_replica == 1
    assert draft.compute.thermal is not None
    assert draft.compute.thermal.latency_scale(60.0) == 1.0
    assert draft.compute.thermal.latency_scale(150.0) == pytest.approx(2.0)
    assert draft.availability.kind == "always" and draft.availability.is_available(1e9)
    assert draft.energy.active_power_w is None and draft.cost.usd_per_hour is None
    target = load_device_profile(write(tmp_path, TARGET))
    assert target.is_target and target.gpus_per_replica == 4
    assert target.compute.max_concurrent_requests is None
    assert target.calibration[0].decode_tok_s == 100.0
    assert target.source_of("energy.active_power_w") == "200 x 4"


def test_json_profile_loads(tmp_path):
    path = tmp_path / "gpu-box.json"
    path.write_text(json.dumps(TARGET), encoding="utf-8")
    assert load_device_profile(path).id == "gpu-box"


def test_unknown_key_suggests_the_right_one(tmp_path):
    doc = copy.deepcopy(DRAFT)
    doc["compute"]["max_concurent_requests"] = 2
    found = issues_of(write(tmp_path, doc))
    assert set(found) == {"compute.max_concurent_requests"}
    issue = found["compute.max_concurent_requests"]
    assert "did you mean 'max_concurrent_requests'" in issue.problem
    assert "max_concurrent_requests" in issue.allowed


def test_wrong_role_lists_allowed_roles(tmp_path):
    doc = copy.deepcopy(DRAFT)
    doc["role"] = "drafter"
    issue = issues_of(write(tmp_path, doc))["role"]
    assert issue.value == "'drafter'"
    assert "'draft'" in issue.allowed and "'target'" in issue.allowed


def test_throttle_factor_above_one(tmp_path):
    doc = copy.deepcopy(DRAFT)
    doc["compute"]["thermal"]["throttle_factor"] = 1.5
    issue = issues_of(write(tmp_path, doc))["compute.thermal.throttle_factor"]
    assert issue.value == "1.5"
    assert "<= 1" in issue.allowed and "> 0" in issue.allowed


def test_gpus_per_replica_must_equal_tp_times_pp(tmp_path):
    doc = copy.deepcopy(TARGET)
    doc["compute"]["gpus_per_replica"] = 3
    doc["memory"]["device_memory_gb"] = 240
    doc["energy"]["active_power_w"] = 600
    found = issues_of(write(tmp_path, doc))
    issue = found["compute.gpus_per_replica"]
    assert issue.value == "3" and issue.allowed.startswith("4 ")


def test_tensor_parallel_above_limit(tmp_path):
    doc = copy.deepcopy(TARGET)
    doc["compute"]["parallelism_limits"]["max_tensor_parallel"] = 1
    issue = issues_of(write(tmp_path, doc))["compute.tensor_parallel"]
    assert issue.value == "2" and "<= 1" in issue.allowed


def test_replica_totals_must_match_per_gpu_values(tmp_path):
    doc = copy.deepcopy(TARGET)
    doc["memory"]["device_memory_gb"] = 100
    doc["energy"]["active_power_w"] = 700
    found = issues_of(write(tmp_path, doc))
    assert found["memory.device_memory_gb"].allowed.startswith("320 ")
    assert found["energy.active_power_w"].allowed.startswith("800 ")


def test_number_without_source_and_source_without_number(tmp_path):
    doc = copy.deepcopy(DRAFT)
    del doc["sources"]["memory.device_memory_gb"]
    doc["sources"]["memory.device_memory_gbs"] = "a typo"
    found = issues_of(write(tmp_path, doc))
    missing = found["memory.device_memory_gb"]
    assert missing.value == "8" and "sources" in missing.allowed
    stray = found['sources["memory.device_memory_gbs"]']
    assert "did you mean 'memory.device_memory_gb'" in stray.problem


def test_self_cited_items_need_no_sources_entry(tmp_path):
    doc = copy.deepcopy(TARGET)
    del doc["calibration"][0]["source"]
    found = issues_of(write(tmp_path, doc))
    assert "calibration[0].source" in found
    assert "calibration[0].decode_tok_s" in found


def test_missing_file(tmp_path):
    path = tmp_path / "absent.yaml"
    issue = issues_of(path)[""]
    assert issue.problem == "not found" and "device profile" in issue.allowed


def test_nan_is_rejected(tmp_path):
    doc = copy.deepcopy(DRAFT)
    doc["memory"]["device_memory_gb"] = float("nan")
    issue = issues_of(write(tmp_path, doc))["memory.device_memory_gb"]
    assert issue.value == "NaN" and "finite" in issue.allowed


def test_id_must_match_file_stem(tmp_path):
    path = write(tmp_path, DRAFT, name="other-name")
    issue = issues_of(path)["id"]
    assert issue.value == "'phone'" and "'other-name'" in issue.allowed


def test_draft_with_target_keys_and_no_concurrency(tmp_path):
    doc = copy.deepcopy(DRAFT)
    del doc["compute"]["max_concurrent_requests"]
    del doc["sources"]["compute.max_concurrent_requests"]
    doc["compute"]["tensor_parallel"] = 2
    doc["sources"]["compute.tensor_parallel"] = "configuration"
    found = issues_of(write(tmp_path, doc))
    assert "only meaningful for role 'target'" in found["compute.tensor_parallel"].problem
    assert "required for role 'draft'" in found["compute.max_concurrent_requests"].problem


def test_target_with_draft_concurrency(tmp_path):
    doc = copy.deepcopy(TARGET)
    doc["compute"]["max_concurrent_requests"] = 4
    doc["sources"]["compute.max_concurrent_requests"] = "configuration"
    issue = issues_of(write(tmp_path, doc))["compute.max_concurrent_requests"]
    assert "only meaningful for role 'draft'" in issue.problem


def test_all_schema_problems_are_reported_together(tmp_path):
    doc = copy.deepcopy(DRAFT)
    doc["network"]["default_link"] = "wify"
    doc["memory"]["device_memory_gb"] = -1
    doc["vendor"] = 7
    found = issues_of(write(tmp_path, doc, name="wrong-stem"))
    assert {"network.default_link", "memory.device_memory_gb", "vendor", "id"} <= set(found)
    assert "did you mean 'wifi'" in found["network.default_link"].problem


def test_availability_windows_rules(tmp_path):
    doc = copy.deepcopy(DRAFT)
    doc["availability"] = {
        "kind": "windows",
        "period_s": 100,
        "windows": [{"start_s": 10, "end_s": 50}, {"start_s": 40, "end_s": 120}],
    }
    for key in (
        "availability.period_s",
        "availability.windows[0].start_s",
        "availability.windows[0].end_s",
        "availability.windows[1].start_s",
        "availability.windows[1].end_s",
    ):
        doc["sources"][key] = "configuration: test schedule"
    found = issues_of(write(tmp_path, doc))
    assert "availability.windows[1].start_s" in found
    assert "availability.windows[1].end_s" in found
    doc = copy.deepcopy(DRAFT)
    doc["availability"] = {"kind": "always", "windows": [{"start_s": 0, "end_s": 1}]}
    doc["sources"]["availability.windows[0].start_s"] = "configuration"
    doc["sources"]["availability.windows[0].end_s"] = "configuration"
    found = issues_of(write(tmp_path, doc))
    assert set(found) == {"availability.windows"}
    assert "kind 'always'" in found["availability.windows"].allowed


@pytest.mark.parametrize(
    ("windows", "key", "problem"),
    [
        ([{"start_s": 10, "end_s": 10.0005}], "availability.windows[0].end_s", "shorter than 1 ms"),
        (
            [{"start_s": 10, "end_s": 20}, {"start_s": 20.0004, "end_s": 30}],
            "availability.windows[1].start_s",
            "gap shorter than 1 ms",
        ),
        (
            [{"start_s": 0.0002, "end_s": 20}, {"start_s": 30, "end_s": 100}],
            "availability.windows",
            "gap shorter than 1 ms",
        ),
    ],
)
def test_availability_spans_under_a_millisecond_are_refused(tmp_path, windows, key, problem):
    doc = copy.deepcopy(DRAFT)
    doc["availability"] = {"kind": "windows", "period_s": 100, "windows": windows}
    doc["sources"]["availability.period_s"] = "configuration: test schedule"
    for index in range(len(windows)):
        for end in ("start_s", "end_s"):
            doc["sources"][f"availability.windows[{index}].{end}"] = "configuration"
    found = issues_of(write(tmp_path, doc))
    assert key in found
    assert problem in found[key].problem


def test_top_level_not_a_mapping(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    issue = issues_of(path)["(top level)"]
    assert "object" in issue.allowed


WINDOWS = Availability(
    kind="windows",
    period_s=100.0,
    windows=(AvailabilityWindow(10.0, 30.0), AvailabilityWindow(60.0, 70.0)),
)


def test_availability_lookup_examples():
    assert not WINDOWS.is_available(5.0)
    assert WINDOWS.is_available(10.0) and not WINDOWS.is_available(30.0)
    assert WINDOWS.next_available_s(5.0) == 10.0
    assert WINDOWS.next_available_s(35.0) == 60.0
    assert WINDOWS.next_available_s(75.0) == 110.0
    assert WINDOWS.next_available_s(265.0) == 265.0


@given(st.floats(min_value=0.0, max_value=1e6, allow_nan=False))
def test_next_available_is_available_and_not_earlier(time_s):
    start = WINDOWS.next_available_s(time_s)
    assert start >= time_s
    assert start - time_s < 100.0
    assert WINDOWS.is_available(start) or WINDOWS.is_available(start + 1e-6)


@given(
    st.floats(min_value=0.0, max_value=1e5, allow_nan=False),
    st.sampled_from([0.1, 0.3, 0.7, 1.1, 100.0]),
    st.integers(min_value=0, max_value=90),
    st.integers(min_value=5, max_value=100),
)
def test_the_lookups_agree_exactly_at_period_boundaries(time_s, period_s, start, width):
    """The next available time is available and the next unavailable one is not, to the ulp."""
    # Windows and gaps on a grid of a hundredth of the period (at least 1 ms, as validated).
    begin = start / 100 * period_s
    end = min(period_s, (start + width) / 100 * period_s)
    availability = Availability("windows", period_s, (AvailabilityWindow(begin, end),))
    opens = availability.next_available_s(time_s)
    assert opens >= time_s and availability.is_available(opens)
    closes = availability.next_unavailable_s(time_s)
    if math.isfinite(closes):
        assert closes >= time_s and not availability.is_available(closes)


def test_a_boundary_of_a_tenth_of_a_second_period_is_consistent():
    # fmod(0.5, 0.1) is 0.09999999999999998: the old lookups disagreed here and a
    # replica re-decided at the same instant for ever.
    availability = Availability("windows", 0.1, (AvailabilityWindow(0.0, 0.05),))
    assert availability.is_available(0.5)
    assert availability.next_available_s(0.5) == 0.5
    assert availability.next_unavailable_s(0.5) == pytest.approx(0.55)
