"""Engine profiles: host time where engines pay it, CUDA-graph padding, eager launches."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from simulator import load_scenario, run
from simulator.devices import BUNDLED_ENGINES, load_engine_profile
from simulator.devices.engine_profile import step_models
from simulator.engine.costs import PhaseCost
from simulator.engine.step_pricing import StepPricer
from simulator.errors import InputError
from simulator.lut import LutKey, LutManager, load_lut
from simulator.validate import validate_file

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ROOT / "device_profiles" / "engines"
H100 = "h100-sxm5-80gb"
FUSED_LUT = ROOT / "lut" / f"llama-2-7b+llama-68m__{H100}.csv"
TARGET_LUT = ROOT / "lut" / f"llama-2-7b__{H100}.csv"
EXAMPLE = ROOT / "scenarios" / "examples" / "datacenter_fused.yaml"


def engine(name: str):  # type: ignore[no-untyped-def]
    return load_engine_profile(ENGINES / f"{name}.yaml")


def cost(lut: Path, phase: str, model: str, profile: str | None) -> PhaseCost:
    key = LutKey(phase, model, H100, 1, 1, "fp16")
    pricer = (
        None
        if profile is None
        else StepPricer(engine(profile), phase, step_models(phase, model), idle_power_w=0.0)
    )
    return PhaseCost(LutManager([load_lut(lut)]), key, "raise", pricer)


def derive() -> ModuleType:
    spec = importlib.util.spec_from_file_location("derive", ROOT / "device_profiles" / "derive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_derive_reproduces_the_committed_profiles():
    rendered = {
        name.removeprefix("engines/"): text
        for name, text in derive().rendered_files().items()
        if name.startswith("engines/")
    }
    assert set(rendered) == {f"{name}.yaml" for name in BUNDLED_ENGINES}
    for name, text in rendered.items():
        assert (ENGINES / name).read_text(encoding="utf-8") == text, name


@pytest.mark.parametrize("name", BUNDLED_ENGINES)
def test_every_bundled_profile_loads_and_cites_its_numbers(name):
    profile = engine(name)
    assert profile.id == name
    document = yaml.safe_load((ENGINES / f"{name}.yaml").read_text(encoding="utf-8"))
    assert document["sources"], name
    if name != "none":
        assert any("inputs/" in text for text in document["sources"].values())


def test_vidur_profile_is_the_fit_the_luts_carried():
    """0.84 ms per pass at batch 1 and 10.4 ms at batch 256 (Vidur's A100 host)."""
    vidur = engine("vidur-vllm-v0")
    assert vidur.charged == "per_forward"
    assert vidur.plain.time_ms(1, 1) == pytest.approx(0.84, abs=0.01)
    assert vidur.plain.time_ms(256, 256) == pytest.approx(10.4, abs=0.1)


@pytest.mark.parametrize("k", [1, 4, 8])
def test_a_fused_round_pays_host_time_once_on_a_cuda_graph_engine(k):
    fused = cost(FUSED_LUT, "fused_decode", "llama-2-7b+llama-68m", "cuda-graph")
    gpu = cost(FUSED_LUT, "fused_decode", "llama-2-7b+llama-68m", None)
    profile = engine("cuda-graph")
    n = 8  # a captured size: no padding
    host_s = profile.speculative.time_ms(n, 0) / 1000.0
    assert fused.at(1024, n, k)[0] == pytest.approx(gpu.at(1024, n, k)[0] + host_s, rel=1e-9)


@pytest.mark.parametrize("k", [1, 4])
def test_the_older_engine_pays_host_time_per_forward_pass(k):
    fused = cost(FUSED_LUT, "fused_decode", "llama-2-7b+llama-68m", "vidur-vllm-v0")
    gpu = cost(FUSED_LUT, "fused_decode", "llama-2-7b+llama-68m", None)
    fit = engine("vidur-vllm-v0").speculative
    n = 8
    host_ms = k * fit.time_ms(n, n) + fit.time_ms(n, n * (k + 1))
    assert fused.at(1024, n, k)[0] == pytest.approx(
        gpu.at(1024, n, k)[0] + host_ms / 1000, rel=1e-9
    )


def test_cuda_graph_padding_prices_five_sequences_as_eight():
    graph = cost(TARGET_LUT, "draft_decode", "llama-2-7b", "cuda-graph")
    gpu = cost(TARGET_LUT, "draft_decode", "llama-2-7b", None)
    host_s = engine("cuda-graph").plain.time_ms(5, 5) / 1000
    assert graph.at(1024, 5, 1)[0] == pytest.approx(gpu.at(1024, 8, 1)[0] + host_s, rel=1e-9)
    assert gpu.at(1024, 8, 1)[0] > gpu.at(1024, 5, 1)[0]
    # prefill does not replay a graph: priced at its real batch
    prefill = cost(TARGET_LUT, "prefill", "llama-2-7b", "cuda-graph")
    plain = cost(TARGET_LUT, "prefill", "llama-2-7b", None)
    host_s = engine("cuda-graph").plain.time_ms(5, 5) / 1000
    assert prefill.at(512, 5, 1)[0] == pytest.approx(plain.at(512, 5, 1)[0] + host_s, rel=1e-9)


def test_a_batch_above_the_largest_graph_is_not_padded():
    profile = engine("cuda-graph")
    largest = profile.graph_batch_sizes[-1]
    assert profile.graph_size(largest) == largest
    assert profile.graph_size(largest + 1) is None


def test_eager_forwards_take_the_longer_of_gpu_and_launch_time():
    """Measured on the H100 host: a 7B decode at batch 1 is launch-bound (about 17 ms)."""
    eager = cost(TARGET_LUT, "draft_decode", "llama-2-7b", "eager-pytorch")
    gpu = cost(TARGET_LUT, "draft_decode", "llama-2-7b", None)
    profile = engine("eager-pytorch")
    assert profile.launch is not None
    launch_ms = profile.launch.forward_ms("llama-2-7b")
    host_ms = profile.plain.time_ms(1, 1)
    assert gpu.at(1024, 1, 1)[0] * 1000 < launch_ms
    assert eager.at(1024, 1, 1)[0] == pytest.approx((launch_ms + host_ms) / 1000, rel=1e-6)
    # a long prefill is GPU-bound: the launch hides under it
    prefill = cost(TARGET_LUT, "prefill", "llama-2-7b", "eager-pytorch")
    plain = cost(TARGET_LUT, "prefill", "llama-2-7b", None)
    gpu_s = plain.at(4096, 4, 1)[0]
    assert gpu_s * 1000 > launch_ms
    assert prefill.at(4096, 4, 1)[0] == pytest.approx(gpu_s + profile.plain.time_ms(4, 4) / 1000)


def test_an_eager_fused_round_launches_every_draft_step_and_the_verify():
    fused = cost(FUSED_LUT, "fused_decode", "llama-2-7b+llama-68m", "eager-pytorch")
    profile = engine("eager-pytorch")
    assert profile.launch is not None
    k = 4
    launches = k * profile.launch.forward_ms("llama-68m") + profile.launch.forward_ms("llama-2-7b")
    host = profile.speculative.time_ms(1, 0)
    assert fused.at(1024, 1, k)[0] == pytest.approx((launches + host) / 1000, rel=1e-6)


def test_host_time_draws_idle_power():
    profile = engine("cuda-graph")
    pricer = StepPricer(profile, "draft_decode", ("llama-2-7b",), idle_power_w=100.0)
    latency_ms, energy_mj = pricer.step(10.0, 5000.0, 8, 1)
    host_ms = profile.plain.time_ms(8, 8)
    assert latency_ms == pytest.approx(10.0 + host_ms)
    assert energy_mj == pytest.approx(5000.0 + host_ms * 100.0 / 1000.0)


def test_profile_choice_changes_a_run_and_the_older_engine_reproduces_old_rounds():
    short = ["workload.duration_s=20"]

    def tpot(name: str) -> float:
        overrides = [*short, f"hardware_profiles[0].engine={name}"]
        summary = run(load_scenario(EXAMPLE, overrides=overrides)).summary
        return float(summary["latency_ms"]["tpot"]["mean"])

    graph, vidur, eager = tpot("cuda-graph"), tpot("vidur-vllm-v0"), tpot("eager-pytorch")
    # a 70B TP4 target drafting with a 68M model: five forward passes per round
    assert graph < vidur < eager


@pytest.mark.parametrize(
    ("engine_value", "problem"),
    [
        ("cuda-grpah", "did you mean 'cuda-graph'"),
        ("missing.yaml", "an existing engine profile file"),
    ],
)
def test_a_bad_engine_value_is_refused(tmp_path, engine_value, problem):
    document = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    document["hardware_profiles"][0]["engine"] = engine_value
    document["hardware_profiles"][0]["profile"] = str(ROOT / "device_profiles" / "a100-tp4.yaml")
    document["speculation"]["fused_models"][0]["lut"] = str(
        ROOT / "lut" / "llama-2-70b+llama-68m__a100-sxm4-80gb.csv"
    )
    document["speculation"]["acceptance_models"][0]["file"] = str(
        ROOT / "acceptance" / "sps_vicuna-7b.yaml"
    )
    document["workload"]["source"] = "trace://" + str(ROOT / "scenarios/traces/azure_conv_10k.csv")
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    verdict = validate_file(path)
    assert not verdict.ok and verdict.error is not None
    text = "\n".join(issue.format() for issue in verdict.error.issues)
    assert "hardware_profiles[0].engine" in text and problem in text


def test_an_engine_on_a_client_class_is_refused():
    scenario = ROOT / "scenarios" / "examples" / "mobile_cloud_distributed.yaml"
    with pytest.raises(InputError, match=r"hardware_profiles\[0\]\.engine.*client"):
        load_scenario(scenario, overrides=["hardware_profiles[0].engine=cuda-graph"])


def test_an_eager_engine_needs_the_layer_count_of_every_model(tmp_path):
    profile = yaml.safe_load((ENGINES / "eager-pytorch.yaml").read_text(encoding="utf-8"))
    profile["id"] = "my-eager"
    del profile["launch"]["model_layers"]["llama-68m"]
    path = tmp_path / "my-eager.yaml"
    path.write_text(yaml.safe_dump(profile), encoding="utf-8")
    with pytest.raises(InputError, match="cannot price eager launches of 'llama-68m'"):
        load_scenario(EXAMPLE, overrides=[f"hardware_profiles[0].engine={path}"])


def test_a_profile_with_unordered_graph_sizes_is_refused(tmp_path):
    profile = yaml.safe_load((ENGINES / "cuda-graph.yaml").read_text(encoding="utf-8"))
    profile["id"] = "odd"
    profile["cuda_graphs"]["batch_sizes"] = [1, 4, 2]
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(profile), encoding="utf-8")
    with pytest.raises(InputError, match="strictly increasing"):
        load_engine_profile(path)


def test_engine_profiles_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        engine("cuda-graph").charged = "per_forward"  # type: ignore[misc]
