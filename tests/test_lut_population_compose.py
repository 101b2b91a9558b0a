"""GPU composition: operator sums, LM head, all-reduce, attention, H100 scaling, fused rounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lut_population.attention import AttentionModel, fit_attention
from lut_population.gpu_compose import BLOCK_OPS, ComposedGpuModel
from lut_population.gpu_scaling import gpu_ratios
from lut_population.inputs import load_attention_profile, load_models, load_operator_profile
from lut_population.operators import MonotoneCurve, ProfiledOps
from lut_population.paths import INPUTS_DIR
from lut_population.phases import FusedRoundCost, SinglePhaseCost, phase_work
from lut_population.plan import gpu_model
from lut_population.work import Work

A100 = "a100-sxm4-80gb"
H100 = "h100-sxm5-80gb"


def one(batch: float, new: float, cached: float, logits: float) -> Work:
    return Work(np.array([batch]), np.array([new]), np.array([cached]), np.array([logits]))


def test_latency_is_the_sum_of_its_parts():
    model = gpu_model("llama-2-70b", A100, 4)
    work = one(8.0, 1.0, 1024.0, 1.0)
    tokens = np.array([8.0])
    block = sum(times * model.ops.time_ms(op, tokens) for op, times in BLOCK_OPS)
    attention = model.attention.time_ms(work.batch, work.new, work.cached)
    assert model.all_reduce is not None
    all_reduce = 2 * model.all_reduce.time_ms(tokens * 8192 * 2)
    once = (
        model.ops.time_ms("emb", tokens)
        + model.ops.time_ms("input_layernorm", tokens)
        + model.ops.lm_head_ms(tokens)
    )  # GPU time only: host time is the simulator's engine profile
    expected = 80 * (block + attention + all_reduce) + once
    assert model.latency_ms(work) == pytest.approx(expected, rel=1e-12)


def test_profiled_operators_follow_the_copied_medians():
    frame = pd.read_csv(INPUTS_DIR / "vidur" / "mlp" / "a100__llama-2-7b.csv")
    rows = frame[frame["num_tensor_parallel_workers"] == 1]
    ops = ProfiledOps(load_operator_profile("a100", "llama-2-7b"), 1, load_models()["llama-2-7b"])
    for op in ("attn_pre_proj", "mlp_up_proj", "mlp_down_proj"):
        tokens = rows["num_tokens"].to_numpy(dtype=float)
        measured = rows[f"time_stats.{op}.median"].to_numpy(dtype=float)
        rel = np.abs(ops.time_ms(op, tokens) - measured) / measured
        assert np.median(rel) < 0.05
    # One token of the MLP up projection of Llama-2-7B on A100 takes about 0.11 ms.
    assert ops.time_ms("mlp_up_proj", np.array([1.0]))[0] == pytest.approx(0.1114, rel=0.02)


def test_lm_head_scales_the_up_projection_by_output_width():
    shape = load_models()["llama-3-8b"]
    ops = ProfiledOps(load_operator_profile("a100", "llama-3-8b"), 2, shape)
    tokens = np.array([1.0, 64.0, 4096.0])
    ratio = shape.vocab_size / (2 * shape.intermediate_size)
    assert np.allclose(ops.lm_head_ms(tokens), ops.time_ms("mlp_up_proj", tokens) * ratio)


def test_operator_time_grows_in_proportion_beyond_the_profile():
    curve = MonotoneCurve(load_operator_profile("a100", "llama-2-7b").curves[1]["mlp_up_proj"])
    top = curve(np.array([curve.max_tokens]))[0]
    assert curve(np.array([3 * curve.max_tokens]))[0] == pytest.approx(3 * top)
    assert np.all(np.diff(curve(np.arange(1.0, 9000.0, 7.0))) >= 0)


def test_all_reduce_only_with_tensor_parallelism():
    single = gpu_model("llama-2-7b", A100, 1)
    double = gpu_model("llama-2-7b", A100, 2)
    assert single.all_reduce is None
    assert np.all(single.all_reduce_ms(np.array([1.0, 100.0])) == 0)
    assert double.all_reduce is not None
    assert double.all_reduce.workers == 2
    assert np.all(double.all_reduce_ms(np.array([1.0, 4096.0])) > 0.05)


def test_attention_fit_reproduces_the_profile_and_scales_with_kv_bytes():
    profile = load_attention_profile()
    fit = fit_attention(profile)
    assert fit.decode_error[0] < 0.15
    assert fit.prefill_error[0] < 0.15
    assert 800 < fit.bandwidth_gb_per_s < 2100  # an A100 reads HBM at up to about 2 TB/s
    reference = AttentionModel(fit, 32, 4, 128)
    eight_times_kv = AttentionModel(fit, 32, 32, 128)
    batch, new, cached = np.array([64.0]), np.array([1.0]), np.array([4096.0])
    small = reference.time_ms(batch, new, cached)[0]
    large = eight_times_kv.time_ms(batch, new, cached)[0]
    memory_part = fit.mem[1] + fit.mem[2] * 64 * 4097 * 2 * 4 * 128 * 2 / 1e9
    assert small == pytest.approx(memory_part)
    assert large == pytest.approx(fit.mem[1] + 8 * (memory_part - fit.mem[1]))


def test_verify_attention_is_never_cheaper_than_decode():
    model = gpu_model("llama-2-7b", A100, 1)
    b, c = np.array([16.0]), np.array([2048.0])
    decode = model.attention.time_ms(b, np.array([1.0]), c)
    verify = model.attention.time_ms(b, np.array([5.0]), c)
    assert verify[0] >= decode[0]


def test_h100_is_faster_and_ratios_are_measured():
    ratios = gpu_ratios("a100", "h100")
    assert 0.45 < ratios.mem < 0.7  # 2.0 vs 3.35 TB/s would be 0.6
    assert 0.2 < ratios.cmp < 0.5
    for model_id in ("llama-2-70b", "llama-3-8b"):
        tp = 4 if model_id == "llama-2-70b" else 1
        work = one(32.0, 1.0, 1024.0, 1.0)
        a = gpu_model(model_id, A100, tp).latency_ms(work)[0]
        h = gpu_model(model_id, H100, tp).latency_ms(work)[0]
        assert 0.4 * a < h < a


def test_llama3_on_h100_uses_the_ratio_scaled_profile():
    model = gpu_model("llama-3-8b", H100, 1)
    assert "h100_ratio" in model.source
    base = gpu_model("llama-3-8b", A100, 1)
    reference_a = gpu_model("llama-2-7b", A100, 1).ops.time_ms("mlp_down_proj", np.array([64.0]))
    reference_h = gpu_model("llama-2-7b", H100, 1).ops.time_ms("mlp_down_proj", np.array([64.0]))
    scaled = model.ops.time_ms("mlp_down_proj", np.array([64.0]))
    expected = base.ops.time_ms("mlp_down_proj", np.array([64.0])) * reference_h / reference_a
    assert scaled[0] == pytest.approx(expected[0], rel=0.1)


def test_energy_is_power_times_latency():
    model = gpu_model("llama-2-7b", H100, 2)
    cost = SinglePhaseCost(model, "draft_decode")
    m = cost.evaluate(np.array([1024.0]), np.array([8.0]), np.array([1.0]))
    power = model.power.power_w_per_gpu(np.array([8.0]))[0] * 2
    assert m.energy_mj[0] == pytest.approx(m.latency_ms[0] * power)
    assert 400 < power / 2 < 720  # measured H100 power while serving


def test_fused_round_is_k_draft_steps_plus_one_verify():
    target = gpu_model("llama-2-7b", A100, 1)
    draft = gpu_model("llama-68m", A100, 1)
    cost = FusedRoundCost(target, draft, "test")
    context, batch, k = np.array([512.0]), np.array([4.0]), np.array([3.0])
    got = cost.evaluate(context, batch, k).latency_ms[0]
    verify = target.latency_ms(phase_work("verify", context, batch, k))[0]
    steps = sum(
        draft.latency_ms(phase_work("draft_decode", context + i, batch, np.ones(1)))[0]
        for i in range(3)
    )
    assert got == pytest.approx(verify + steps)


def test_draft_on_a_datacenter_gpu_is_much_cheaper_than_its_target():
    work = one(1.0, 1.0, 512.0, 1.0)
    target = gpu_model("llama-2-7b", A100, 1).latency_ms(work)[0]
    draft = gpu_model("tinyllama-1.1b", A100, 1).latency_ms(work)[0]
    assert draft < 0.5 * target
    assert isinstance(gpu_model("tinyllama-1.1b", A100, 1), ComposedGpuModel)
