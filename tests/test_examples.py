"""The shipped example and benchmark scenarios: valid, runnable, and stable.

Golden figures live in ``tests/golden/examples.json``; after an intended
change of behaviour, refresh them with ``python -m tests.golden`` and review
the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.acceptance import load_acceptance_model
from simulator.errors import InputError
from simulator.planner.windows import window_runner
from simulator.runner import build_requests, run
from simulator.scenario import load_scenario
from simulator.validate import validate_file
from tests.commands import run_python
from tests.golden.runs import EXAMPLES, GOLDEN_FILE, ROOT, TEST_SIZE, key_figures, run_example

SCENARIO_FILES = sorted((ROOT / "scenarios").rglob("*.yaml"))
GOLDEN = json.loads(GOLDEN_FILE.read_text(encoding="utf-8"))


def test_every_example_has_golden_figures():
    names = {path.stem for path in EXAMPLES.glob("*.yaml")}
    assert names == set(TEST_SIZE) == set(GOLDEN)
    # The issue's four kinds: mobile-to-cloud, low-RTT fused vs distributed, hybrid, none.
    assert {"mobile_cloud_distributed", "low_rtt_fused", "low_rtt_distributed"} <= names
    assert {"hybrid_mix", "none_baseline"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_scenario_file_validates(path):
    verdict = validate_file(path)
    assert verdict.ok, verdict


@pytest.mark.slow
def test_validate_script_accepts_the_scenarios_directory():
    done = run_python("scripts/validate_scenario.py", "scenarios")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("OK ") == len(SCENARIO_FILES)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TEST_SIZE))
def test_example_matches_its_golden_figures(name):
    figures = key_figures(run_example(name))
    expected = GOLDEN[name]
    assert figures.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, float):
            assert figures[key] == pytest.approx(value, rel=1e-6), key
        else:
            assert figures[key] == value, key


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TEST_SIZE))
def test_example_prices_its_tokens_and_names_what_it_covers(name):
    cost = run_example(name)["cost"]
    assert cost["usd_per_1k_tokens"] is not None and cost["usd_per_1k_tokens"] > 0
    targets = [n for n, c in cost["by_device_class"].items() if c["type"] == "target"]
    assert set(targets) <= set(cost["covers"])


def _expected_acceptance_rate(curve: Path, k: int) -> float:
    model = load_acceptance_model(curve)
    return model.expected_accepted(k, 512) / k


@pytest.mark.parametrize(
    "name",
    [
        "mobile_cloud_distributed",
        "low_rtt_distributed",
        "low_rtt_fused",
        "hybrid_mix",
        "datacenter_fused",
    ],
)
def test_speculative_examples_accept_what_their_curve_predicts(name):
    """Every example speculates with k = 4 on the Spec-Bench SpS Vicuna-7B curve."""
    expected = _expected_acceptance_rate(ROOT / "acceptance" / "sps_vicuna-7b.yaml", 4)
    measured = GOLDEN[name]["acceptance_rate"]
    assert measured == pytest.approx(expected, rel=0.03)


def test_none_baseline_speculates_nothing_and_fused_has_no_network_rounds():
    assert GOLDEN["none_baseline"]["verify_steps"] == 0
    assert GOLDEN["none_baseline"]["tvt_p50_ms"] is None
    assert GOLDEN["low_rtt_fused"]["tvt_p50_ms"] is None
    assert GOLDEN["low_rtt_distributed"]["tvt_p50_ms"] > 0


RUN_CAP = "workload.max_requests=120"
LONG_PROMPTS = "workload.prompt_length_override={dist: uniform, low: 128, high: 1024}"


def _runs_or_is_refused(path: Path, overrides: list[str]) -> bool:
    """Load with ``overrides``; when it loads, it must run. Return whether it loaded."""
    try:
        scenario = load_scenario(path, overrides)
    except InputError as exc:
        assert all(issue.file == str(path) for issue in exc.issues), exc
        return False
    windows = window_runner("local", None, None)  # where `simulate run` sends a planner's windows
    try:
        result = run(scenario, windows=windows)
    finally:
        windows.close()
    assert len(result.requests) == len(build_requests(scenario))
    return True


RUNNABLE_FILES = [p for p in SCENARIO_FILES if p.parent.name not in ("sweeps", "plans")]
"""Sweep files (scenarios/sweeps/) are run in tests/test_sweeps.py, plan spaces
(scenarios/plans/) are validated above and planned in tests/test_plan.py."""


@pytest.mark.slow
@pytest.mark.parametrize("path", RUNNABLE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_scenario_runs_and_raise_is_checked_before_the_run(path):
    """A shipped scenario runs as shipped; under lut_out_of_range: raise it either is
    refused by the loader or runs through, never failing mid-run."""
    assert _runs_or_is_refused(path, [RUN_CAP])
    strict = [RUN_CAP, "simulation.lut_out_of_range=raise"]
    loaded = _runs_or_is_refused(path, strict)
    if "trace://" in path.read_text():
        # Prompts of at least 128 tokens are on every shipped LUT's grid.
        assert _runs_or_is_refused(path, [*strict, LONG_PROMPTS])
        # The shipped traces hold prompts below 128 tokens, but for the Mooncake slice
        # with block ids (its shortest prompt has 891 tokens).
        assert not loaded or "mooncake_conv_prefix_600.csv" in path.read_text()


STORY_PAIRS = [("datacenter_fused", "none_baseline"), ("mobile_cloud_distributed", "none_baseline")]
"""Each speculative example the README compares with its baseline."""


@pytest.mark.parametrize(("name", "baseline"), STORY_PAIRS)
def test_story_pairs_share_pool_trace_seed_and_slos(name, baseline):
    run, base = (load_scenario(EXAMPLES / f"{n}.yaml") for n in (name, baseline))
    assert run.workload.slo_classes == base.workload.slo_classes
    assert run.resolved()["workload"]["source"] == base.resolved()["workload"]["source"]
    assert run.resolved()["workload"]["duration_s"] == base.resolved()["workload"]["duration_s"]
    assert run.seed == base.seed
    pools = [(d.id, d.count, d.profile_path) for d in run.devices if d.type == "target"]
    assert pools == [(d.id, d.count, d.profile_path) for d in base.devices if d.type == "target"]


def test_fused_speculation_pays_off_where_mobile_drafting_does_not():
    """The README's story, on the golden (test-size) runs."""
    base, fused, mobile = (
        GOLDEN[n] for n in ("none_baseline", "datacenter_fused", "mobile_cloud_distributed")
    )
    assert fused["tpot_p50_ms"] < 0.7 * base["tpot_p50_ms"]
    assert fused["j_per_output_token"] < base["j_per_output_token"]
    assert mobile["tpot_p50_ms"] > base["tpot_p50_ms"]
    assert mobile["slo_attainment"] < 0.5 * base["slo_attainment"]
