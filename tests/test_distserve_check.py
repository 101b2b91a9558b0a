"""The DistServe check's data: the OPT LUTs priced by DistServe's fits, the models, the case."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

import simulator
from lut_population.checks import check_monotone_fitted
from lut_population.distserve_fit import SOURCE, VLLM_SOURCE, distserve_plan
from lut_population.inputs import load_models
from lut_population.plan import gpu_memory_mb
from simulator.errors import InputError
from simulator.lut import LutKey, LutManager, load_lut, table_from_frame
from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent
LUT = ROOT / "lut" / "opt-13b__a100-sxm4-80gb.csv"
FITS = ROOT / "lut_population" / "inputs" / "distserve" / "profiler-a100-80g.distserve.json"
VLLM_FITS = FITS.with_name("profiler-a100-80g.vllm.json")
VLLM_LUT = ROOT / "lut" / "distserve_vllm" / "opt-13b__a100-sxm4-80gb.csv"
CAPACITY = ROOT / "device_profiles" / "inputs" / "distserve_max_num_tokens.csv"
CASE = ROOT / "scenarios" / "distserve_check" / "colocated_opt13b_a100.yaml"
HW = "a100-sxm4-80gb"


def _fit(tp: int) -> dict[str, object]:
    fits: dict[str, dict[str, dict[str, object]]] = json.loads(FITS.read_text(encoding="utf-8"))
    return fits["facebook/opt-13b"][str(tp)]


def _lookup(phase: str, tp: int, context: int, batch: int) -> float:
    manager = LutManager([load_lut(LUT, use_cache=False)])
    key = LutKey(phase, "opt-13b", HW, tp, 1, "fp16")
    return float(manager.lookup(key, context, batch, 1, out_of_range="raise").latency_ms)


@pytest.mark.parametrize(
    ("tp", "prompt", "batch"), [(1, 128, 1), (1, 1024, 4), (1, 2048, 8), (2, 512, 16), (4, 64, 2)]
)
def test_prefill_rows_are_distserves_estimator(tp, prompt, batch):
    # time_estimator.get_prefill_time at pp 1: a + b * sum(l) + c * sum(l^2) + 1 (pp_const).
    a, b, c = _fit(tp)["prefill"]  # type: ignore[misc]
    expected = a + b * batch * prompt + c * batch * prompt**2 + 1.0
    assert _lookup("prefill", tp, prompt, batch) == pytest.approx(expected, rel=5e-6)


@pytest.mark.parametrize(
    ("tp", "context", "batch"),
    [(1, 512, 1), (1, 1024, 94), (1, 1024, 95), (1, 2048, 256), (2, 128, 64), (4, 2048, 128)],
)
def test_decode_rows_are_distserves_estimator(tp, context, batch):
    # time_estimator.get_decode_time: a + b * sum(context + 1) + c * n, the small-batch fit
    # below decoding_large_small_bs_threshold and the large-batch fit from it on.
    fit = _fit(tp)
    small = batch < int(fit["decoding_large_small_bs_threshold"])  # type: ignore[call-overload]
    a, b, c = fit["decoding_smallbs" if small else "decoding_largebs"]  # type: ignore[misc]
    expected = a + b * batch * (context + 1) + c * batch
    assert _lookup("draft_decode", tp, context, batch) == pytest.approx(expected, rel=5e-6)


def test_every_row_names_the_fit_and_every_fitted_tp_is_there():
    frame = pd.read_csv(LUT, keep_default_na=False)
    assert set(frame["source"]) == {SOURCE}
    assert set(frame["phase"]) == {"prefill", "draft_decode"}
    assert sorted(set(frame["tensor_parallel"])) == [1, 2, 4]
    assert frame["context_len"].max() == load_models()["opt-13b"].max_context
    names = {spec.name for spec in distserve_plan()}
    assert names == {
        f"{folder}{model}__a100-sxm4-80gb.csv"
        for folder in ("", "distserve_vllm/")
        for model in ("opt-13b", "opt-66b")
    }


def test_the_vllm_file_is_distserves_fit_of_vllm():
    fits = json.loads(VLLM_FITS.read_text(encoding="utf-8"))["facebook/opt-13b"]["1"]
    a, b, c = fits["prefill"]
    table = LutManager([load_lut(VLLM_LUT, use_cache=False)])
    key = LutKey("prefill", "opt-13b", HW, 1, 1, "fp16")
    got = float(table.lookup(key, 1024, 2, 1, out_of_range="raise").latency_ms)
    assert got == pytest.approx(a + b * 2 * 1024 + c * 2 * 1024**2 + 1.0, rel=5e-6)
    a, b, c = fits["decoding_largebs"]
    key = LutKey("draft_decode", "opt-13b", HW, 1, 1, "fp16")
    got = float(table.lookup(key, 512, 128, 1, out_of_range="raise").latency_ms)
    assert got == pytest.approx(a + b * 128 * 513 + c * 128, rel=5e-6)
    assert set(pd.read_csv(VLLM_LUT, keep_default_na=False)["source"]) == {VLLM_SOURCE}


def test_a_hole_in_the_grid_is_refused_at_load():
    frame = pd.read_csv(LUT, keep_default_na=False)
    with pytest.raises(InputError, match=r"rectangular|missing|grid"):
        table_from_frame(frame.drop(index=5), "opt-13b-hole.csv")
    table_from_frame(frame, "opt-13b.csv")


def test_the_threshold_step_is_the_only_accepted_step_down():
    frame = pd.read_csv(LUT, keep_default_na=False)
    result = check_monotone_fitted({"opt-13b": frame})
    assert result.ok
    assert all("batch 95" in line for line in result.details)
    broken = frame.copy()
    row = (broken["phase"] == "prefill") & (broken["context_len"] == 1024)
    broken.loc[row, "latency_ms"] = 1.0
    assert not check_monotone_fitted({"opt-13b": broken}).ok


def test_opt_13b_shape_and_distserves_kv_capacity_agree():
    shape = load_models()["opt-13b"]
    assert (shape.num_layers, shape.hidden_size, shape.num_heads) == (40, 5120, 40)
    assert (shape.intermediate_size, shape.vocab_size, shape.max_context) == (20480, 50272, 2048)
    assert not shape.gated_mlp
    # DistServe's measured KV capacity of OPT-13B on one A100-80GB fits beside the fp16
    # weights, and fills most of what is left (its memory utilisation was 0.95).
    capacity = pd.read_csv(CAPACITY)
    tokens = capacity.query("model == 'facebook/opt-13b' and tp == 1 and pp == 1")
    kv_mb = float(tokens["max_num_tokens"].iloc[0]) * shape.kv_mib_per_token
    free_mb = gpu_memory_mb(HW) - shape.weight_bytes() / 2**20
    assert 0.85 * free_mb < kv_mb < free_mb


def test_every_configuration_of_the_script_exists():
    script = load_script(ROOT / "scripts" / "distserve_check.py", "distserve_check")
    for config in script.SCENARIOS:
        assert (ROOT / config.scenario).is_file()
        assert simulator.load_scenario(ROOT / config.scenario).scenario_id


def test_lengths_file_is_the_filtered_trace():
    script = load_script(ROOT / "scripts" / "distserve_check.py", "distserve_check")
    expected = script.opt_lengths()
    shipped = pd.read_csv(script.LENGTHS_FILE)
    assert shipped.reset_index(drop=True).equals(expected.reset_index(drop=True))
    assert (shipped.sum(axis=1) < 2048).all()


def test_rate_at_interpolates_the_crossing():
    script = load_script(ROOT / "scripts" / "distserve_check.py", "distserve_check")
    assert script.rate_at([1.0, 2.0, 3.0], [0.99, 0.95, 0.5], 0.9) == pytest.approx(
        2.0 + 0.05 / 0.45
    )
    assert script.rate_at([1.0, 2.0], [0.99, 0.95], 0.9) is None


@pytest.mark.parametrize("case", [CASE, CASE.with_name("colocated_opt13b_a100_vllm_costs.yaml")])
def test_colocated_case_validates_and_runs(case):
    scenario = simulator.load_scenario(case, ["workload.synthetic.num_requests=40"])
    result = simulator.run(scenario)
    goodput = result.summary["goodput"]
    assert result.summary["requests"]["completed"] == 40
    assert 0.0 <= goodput["slo_attainment"] <= 1.0


@pytest.mark.parametrize(
    "name",
    ["colocated_opt13b_a100", "colocated_opt13b_a100_vllm_costs", "disaggregated_opt13b_a100"],
)
def test_each_paged_configuration_is_its_file_with_kv_that_grows(name):
    """The ``_paged`` files differ from theirs only in the KV rule, the id and the label."""
    whole = yaml.safe_load((CASE.parent / f"{name}.yaml").read_text())
    paged_name = name.replace("opt13b_a100", "opt13b_a100_paged")
    paged = yaml.safe_load((CASE.parent / f"{paged_name}.yaml").read_text())
    assert paged["scheduler"].pop("kv") == {"on_full": "preempt_recompute"}
    assert "kv" not in whole["scheduler"]  # the default: on_full queue
    assert paged.pop("scenario_id") == whole.pop("scenario_id").replace(
        "distserve_check_", "distserve_check_paged_"
    )
    assert paged["metadata"].pop("label") == whole["metadata"].pop("label") + ", paged KV"
    assert paged == whole


def test_the_paged_disaggregated_case_validates_and_runs():
    case = CASE.with_name("disaggregated_opt13b_a100_paged.yaml")
    scenario = simulator.load_scenario(case, ["workload.synthetic.num_requests=40"])
    result = simulator.run(scenario)
    assert result.summary["requests"]["completed"] == 40
    assert result.summary["disaggregation"]["transfers"] == 40


def test_distserves_placement_prefills_at_tp_2_on_the_derived_profile():
    case = CASE.with_name("disaggregated_opt13b_a100_paged_tp2.yaml")
    scenario = simulator.load_scenario(case, ["workload.synthetic.num_requests=40"])
    prefill = next(d for d in scenario.devices if d.role == "prefill")
    assert (prefill.tensor_parallel, prefill.profile_path.name) == (2, "a100-tp2.yaml")
    result = simulator.run(scenario)
    assert result.summary["requests"]["completed"] == 40
    assert result.summary["disaggregation"]["by_role"]["prefill"]["gpu_hours"] > 0


@pytest.mark.parametrize(
    "name", ["colocated_opt13b_a100_paged_vllm_costs", "colocated_opt13b_a100_paged"]
)
def test_each_one_gpu_file_is_its_two_gpu_file_on_one_gpu(name):
    """vLLM as the paper ran it, and one GPU at DistServe's costs: one replica, nothing else."""
    two = yaml.safe_load((CASE.parent / f"{name}.yaml").read_text())
    one = yaml.safe_load((CASE.parent / f"{name}_1gpu.yaml").read_text())
    assert [d.pop("count") for d in two["hardware_profiles"]] == [2]
    assert [d.pop("count") for d in one["hardware_profiles"]] == [1]
    for doc in (one, two):
        doc.pop("scenario_id")
        doc.pop("metadata")
    assert one == two


def test_export_writes_distserves_custom_workload(tmp_path):
    """Requests go out in arrival order as DistServe's simulator reads a custom workload."""
    script = load_script(ROOT / "scripts" / "distserve_check.py", "distserve_check")
    table = tmp_path / "requests.csv"
    table.write_text(
        "request_id,arrival_s,prompt_tokens,output_tokens,ttft_ms\n"
        "1,0.75,300,12,5.0\n0,0.0,120,7,4.0\n2,1.5,64,1,3.0\n",
        encoding="utf-8",
    )
    target = tmp_path / "out" / "vllm_1gpu_paged" / "rate_1.json"
    assert script.export_requests(table, target) == 3
    assert json.loads(target.read_text(encoding="utf-8")) == [
        {"start_time": 0.0, "prompt_len": 120, "output_len": 7},
        {"start_time": 0.75, "prompt_len": 300, "output_len": 12},
        {"start_time": 1.5, "prompt_len": 64, "output_len": 1},
    ]


def test_paper_ratio_divides_distserves_rate_by_vllms():
    script = load_script(ROOT / "scripts" / "distserve_check.py", "distserve_check")
    lines = script.paper_ratios(
        {"disaggregated_paged_tp2": 1.5, "vllm_1gpu_paged": 1.0, "disaggregated_paged": None}
    )
    assert lines == [
        "disaggregated_paged_tp2 over vllm_1gpu_paged (per-GPU rate at 90%): 1.500 / 1.000 = 1.50x",
        "disaggregated_paged over vllm_1gpu_paged: a rate did not cross 90%",
    ]
    assert script.paper_ratios({"vllm_1gpu_paged": 1.0}) == []


def test_export_requests_option_writes_every_point(tmp_path):
    script = load_script(ROOT / "scripts" / "distserve_check.py", "distserve_check")
    code = script.main(
        [
            "--only",
            "vllm_1gpu_paged",
            "--rates",
            "0.5,1.0",
            "--requests",
            "30",
            "--export-requests",
            str(tmp_path / "x"),
            "-o",
            str(tmp_path / "runs"),
        ]
    )
    assert code == 0
    for rate in ("0.5", "1"):
        rows = json.loads((tmp_path / "x" / "vllm_1gpu_paged" / f"rate_{rate}.json").read_text())
        assert len(rows) == 30
        assert [r["start_time"] for r in rows] == sorted(r["start_time"] for r in rows)


def _compare_script():
    return load_script(ROOT / "scripts" / "distserve_sim_compare.py", "distserve_sim_compare")


def test_the_comparison_refuses_a_folder_without_distserves_simulator(tmp_path, capsys):
    script = _compare_script()
    with pytest.raises(SystemExit) as stopped:
        script.their_simulator(tmp_path, 250.0, 100.0)
    assert stopped.value.code == 2
    message = capsys.readouterr().err
    assert str(tmp_path) in message
    assert "a checkout of LLMServe/DistServe" in message


def test_the_comparison_hands_both_simulators_the_same_request_files(tmp_path):
    """Each configuration's exported streams go to DistServe's simulator with its placement."""
    script = _compare_script()
    calls = []

    def theirs(workload, backend, ray):
        count = len(json.loads(workload.read_text()))
        calls.append((workload.parent.name, tuple(backend), ray, count))
        return 0.5 if ray else 0.75

    table = script.compare(theirs, [0.5, 1.0], 12, 3, tmp_path)
    assert list(table) == list(script.PAIRS)
    for name, backend in script.PAIRS.items():
        mine = [(b, ray, n) for folder, b, ray, n in calls if folder == name]
        assert mine == [(tuple(backend), ray, 12) for ray in (True, True, False, False)]
        assert table[name][script.SOURCES[0]] == [0.5, 0.5]
        assert table[name][script.SOURCES[1]] == [0.75, 0.75]
        assert all(0.0 <= a <= 1.0 for a in table[name][script.SOURCES[2]])


def test_the_comparison_report_gives_crossings_and_the_papers_ratios():
    script = _compare_script()
    rates = [1.0, 2.0]
    table = {name: {source: [0.95, 0.85] for source in script.SOURCES} for name in script.PAIRS}
    table["disaggregated_paged"][script.SOURCES[2]] = [0.99, 0.89]
    lines = script.report(rates, table)
    assert lines[0] == "| per-GPU rate (req/s) | 1 | 2 | rate at 90 % |"
    assert "| vllm_1gpu_paged: DistServe's simulator | 95.0 % | 85.0 % | 1.500 |" in lines
    assert "| ... this simulator | 99.0 % | 89.0 % | 1.900 |" in lines
    assert "disaggregated_paged over vllm_1gpu_paged, this simulator: 1.27x" in lines
    assert "disaggregated_paged_tp2 over vllm_1gpu_paged, DistServe's simulator: 1.00x" in lines


@pytest.mark.parametrize("text", ["1,x", "2,1", "0.5,-1", "", "nan", "1,inf"])
def test_bad_rates_are_refused_with_what_is_allowed(text, capsys):
    script = load_script(ROOT / "scripts" / "distserve_check.py", "distserve_check")
    with pytest.raises(SystemExit) as stopped:
        script.main(["--rates", text])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --rates: got {text!r}" in err
    assert "allowed: comma-separated numbers > 0 in increasing order" in err


def test_bad_request_counts_and_names_are_refused(capsys):
    script = load_script(ROOT / "scripts" / "distserve_check.py", "distserve_check")
    with pytest.raises(SystemExit) as stopped:
        script.main(["--requests", "0"])
    assert stopped.value.code == 2
    assert "argument --requests: got '0'; allowed: an integer >= 1" in capsys.readouterr().err
    assert script.main(["--only", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no configuration named ['nope']; allowed: colocated," in err
    assert script.rates_option("0.25,1,2.5") == [0.25, 1.0, 2.5]
