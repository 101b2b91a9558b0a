"""scripts/bench.py: every workload loads as configured; variants differ from their base as named."""

from __future__ import annotations

import importlib.util
import json

import pytest

from simulator import load_scenario
from tests.golden.runs import ROOT
from tests.script_modules import load_script

_SPEC = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
assert _SPEC is not None and _SPEC.loader is not None
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


@pytest.mark.parametrize("name", sorted(bench.WORKLOADS))
def test_bench_workload_loads_with_its_overrides(name):
    spec = bench.WORKLOADS[name]
    load_scenario(bench.BENCH_SCENARIOS / spec["scenario"], overrides=spec["overrides"])
    if spec["target"] is None:
        base = bench.WORKLOADS[spec["compare_with"]]
        assert base["target"] is not None and base["scenario"] == spec["scenario"]
        assert spec["overrides"]
    else:
        assert "compare_with" not in spec


def test_distributed_variants_run_the_policies_they_are_named_after():
    def load(name):
        spec = bench.WORKLOADS[name]
        return load_scenario(bench.BENCH_SCENARIOS / spec["scenario"], overrides=spec["overrides"])

    static = load("distributed_rounds")
    assert static.speculation.k_control.name == "static"
    assert static.scheduler.verify.policy.name == "fcfs"
    adaptive = load("distributed_rounds_acceptance_feedback")
    assert adaptive.speculation.k_control.name == "acceptance_feedback"
    assert (adaptive.speculation.k_min, adaptive.speculation.k_max) == (2, 8)
    edf = load("distributed_rounds_edf")
    assert edf.speculation.k_control.name == "static"
    assert edf.scheduler.verify.policy.name == "edf"


def test_a_variant_prints_its_speed_as_a_multiple_of_its_base():
    rows = {
        "distributed_rounds": {
            "verify_rounds_per_wall_s": 80000,
            "target": "t",
            "target_met": True,
        },
        "distributed_rounds_edf": {
            "workload": "distributed_rounds_edf",
            "verify_rounds_per_wall_s": 60000,
            "target": None,
        },
    }
    verdict = bench._verdict(rows["distributed_rounds_edf"], rows)
    assert verdict == "no target; rounds/wall s 0.75 x distributed_rounds's"
    alone = bench._verdict(rows["distributed_rounds_edf"], {})
    assert "variant of distributed_rounds" in alone


def test_readme_quotes_the_stored_baseline():
    baseline = json.loads(bench.BASELINE.read_text(encoding="utf-8"))
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    rows = {row["workload"]: row for row in baseline["results"]}
    for name, row in rows.items():
        if row["verify_rounds"]:
            best = f"{round(row['verify_rounds_per_wall_s'], -2):,}"
            median = f"median {round(row['verify_rounds_per_wall_s_median'], -2):,}"
            assert f"{best} " in readme and median in readme, name
    azure = rows["none_azure_conv_10k"]
    assert f"take {azure['wall_s']:.2f} s (median {azure['wall_s_median']:.2f} s" in readme
    assert f"peak at {round(rows['none_synthetic_100k']['peak_rss_mb'])} MB" in readme


def test_skeleton_runs_the_bench_shape_round_by_round():
    skeleton = load_script(ROOT / "scripts" / "skeleton_rounds.py", "skeleton_rounds")
    shape = skeleton.BENCH_SHAPE
    rounds, wall_s = skeleton.run_once(shape, 3 * shape.requests)
    assert rounds == 3 * shape.requests
    assert wall_s > 0
    assert skeleton.skeleton_rounds_per_s(shape.requests, 1) > 0
