"""Heavy modules are imported only when a run needs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import json, sys
from simulator import load_scenario, run
run(load_scenario(sys.argv[1], overrides=json.loads(sys.argv[2])))
print(json.dumps(sorted(sys.modules)))
"""


def _imports(module: str, scenario: Path, *overrides: str) -> bool:
    """Whether a fresh process running ``scenario`` (50 requests) imports ``module``."""
    settings = json.dumps(["workload.max_requests=50", *overrides])
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(scenario), settings],
        capture_output=True,
        text=True,
        check=True,
    )
    return module in json.loads(out.stdout.strip().splitlines()[-1])


def _imports_special(scenario: Path, *overrides: str) -> bool:
    return _imports("scipy.special", scenario, *overrides)


def test_a_run_without_a_planner_does_not_import_it():
    scenario = ROOT / "scenarios" / "bench" / "distributed_rounds.yaml"
    assert not _imports("simulator.planner.online", scenario)
    planner = (
        "planner.enabled=true",
        "planner.model_load_s=0",
        "planner.candidates.verify_replicas=[1, 2]",
    )
    assert _imports("simulator.planner.online", scenario, *planner)


def test_a_trace_driven_run_does_not_import_scipy_special():
    """About 0.1 s of every run's start: only truncated length distributions and request-level
    acceptance spread use it."""
    assert not _imports_special(ROOT / "scenarios" / "bench" / "none_azure_conv_10k.yaml")


def test_truncated_lengths_import_it_when_they_sample():
    scenario = ROOT / "scenarios" / "examples" / "low_rtt_fused.yaml"
    lengths = "{dist: lognormal, median: 200, sigma: 0.5, min: 16, max: 1024}"
    assert _imports_special(scenario, f"workload.prompt_length_override={lengths}")


VALIDATE = """
import sys
from simulator.validate import validate_file
from pathlib import Path
assert validate_file(Path(sys.argv[1])).ok
print("pandas" in sys.modules)
"""


def _validate_imports_pandas(scenario: Path) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", VALIDATE, str(scenario)], capture_output=True, text=True, check=True
    )
    return out.stdout.strip() == "True"


def test_validating_a_synthetic_scenario_does_not_import_pandas():
    """pandas (about 0.2 s) reads traces and builds result tables; LUTs are read without it."""
    assert not _validate_imports_pandas(ROOT / "scenarios" / "bench" / "distributed_rounds.yaml")


def test_validating_a_trace_scenario_does_not_import_pandas():
    """A well-formed CSV trace is read without pandas (its fast path)."""
    assert not _validate_imports_pandas(ROOT / "scenarios" / "bench" / "none_azure_conv_10k.yaml")


def test_a_trace_the_fast_path_does_not_read_is_read_with_pandas(tmp_path: Path):
    scenario = ROOT / "scenarios" / "bench" / "none_azure_conv_10k.yaml"
    trace = ROOT / "scenarios" / "traces" / "azure_conv_10k.csv"
    lines = trace.read_text().splitlines()
    lines[1] = ",".join(f'"{cell}"' for cell in lines[1].split(","))  # quoted cells
    (tmp_path / "trace.csv").write_text("\n".join(lines) + "\n")
    text = scenario.read_text().replace("trace://../traces/azure_conv_10k.csv", "trace://trace.csv")
    text = text.replace("../../", str(ROOT) + "/")
    (tmp_path / "scenario.yaml").write_text(text)
    assert _validate_imports_pandas(tmp_path / "scenario.yaml")
