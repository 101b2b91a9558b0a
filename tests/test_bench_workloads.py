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


def test_a_time_is_judged_at_the_baseline_machines_speed():
    # Twice as long on a machine half as fast: the same speed.
    assert bench._change(2.0, 1.0, 0.5, True) == (2.0, 1.0, "within 15%")
    assert bench._change(2.0, 1.0, None, True) == (2.0, None, "slower")
    assert bench._change(0.5, 1.0, 1.0, True)[2] == "faster"
    # Memory is never normalised.
    assert bench._change(120.0, 100.0, 0.5, False) == (1.2, None, "larger")
    assert bench._change(80.0, 100.0, 2.0, False)[2] == "smaller"


def _row(name, wall_s, peak_mb):
    return {"workload": name, "wall_s": wall_s, "peak_rss_mb": peak_mb}


def test_the_comparison_names_each_figure_both_sides_have():
    stored = {
        "machine": {"python": "0.0", "processor": "none", "cpus": 64},
        "results": [_row("none_azure_conv_10k", 1.0, 100.0)],
        "whole_process": [{"command": "simulate run x", "wall_s": 2.0}],
        "skeleton_rounds_per_wall_s": 200_000,
    }
    rows = [_row("none_azure_conv_10k", 1.5, 100.0), _row("distributed_rounds", 2.0, 90.0)]
    whole = [{"command": "simulate run x", "wall_s": 2.0}, {"command": "new", "wall_s": 1.0}]
    lines = bench.against_baseline(rows, whole, 100_000.0, stored, "b.json")
    text = "\n".join(lines)
    assert lines[0].startswith("against b.json: machine speed now / then 0.50")
    assert "stored on another machine" in lines[1]
    wall = next(line for line in lines if "none_azure_conv_10k: best wall" in line)
    # 1.5 times the time on a machine half as fast: 0.75 at the baseline's speed.
    assert wall.split()[-3:] == ["1.50", "0.75", "faster"]
    memory = next(line for line in lines if "peak memory" in line)
    assert memory.split()[-4:] == ["1.00", "-", "within", "15%"]
    assert "distributed_rounds: not in the baseline" in text
    assert "whole process: simulate run x" in text and "new" not in text


def test_without_a_skeleton_on_both_sides_times_are_judged_as_measured():
    stored = {"results": [_row("none_azure_conv_10k", 1.0, 100.0)]}
    lines = bench.against_baseline([_row("none_azure_conv_10k", 1.5, 100.0)], [], 1e5, stored, "b")
    assert "not normalised" in lines[0]
    wall = next(line for line in lines if "best wall" in line)
    assert wall.split()[-3:] == ["1.50", "-", "slower"]


def test_a_baseline_is_read_or_refused_with_a_message(tmp_path):
    assert bench.read_baseline(tmp_path / "none.json", required=False) is None
    with pytest.raises(ValueError, match="no such file"):
        bench.read_baseline(tmp_path / "none.json", required=True)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot be read as JSON"):
        bench.read_baseline(bad, required=True)
    bad.write_text(json.dumps({"results": [{"workload": "x", "wall_s": -1}]}), encoding="utf-8")
    with pytest.raises(ValueError, match="positive 'wall_s' and 'peak_rss_mb'"):
        bench.read_baseline(bad, required=True)
    stored = bench.read_baseline(bench.BASELINE, required=True)
    assert stored is not None and stored["skeleton_rounds_per_wall_s"] > 0
