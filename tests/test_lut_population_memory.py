"""Model facts, KV deltas and peak memory."""

from __future__ import annotations

import numpy as np
import pytest

from lut_population.checks import expected_kv_mb
from lut_population.inputs import load_models
from lut_population.phases import FusedPrefillCost, FusedRoundCost, SinglePhaseCost
from lut_population.plan import gpu_model
from lut_population.shapes import BYTES_PER_MIB

A100 = "a100-sxm4-80gb"


def test_parameter_counts_derived_from_the_shapes_match_the_model_names():
    models = load_models()
    expected = {
        "llama-2-7b": 6.7e9,
        "llama-2-70b": 69e9,
        "llama-3-8b": 8.0e9,
        "tinyllama-1.1b": 1.1e9,
        "llama-68m": 68e6,
        "llama-3.2-1b": 1.24e9,
        "qwen2.5-1.5b": 1.54e9,
        "llama-3.2-3b": 3.2e9,
    }
    for model_id, params in expected.items():
        assert models[model_id].total_params == pytest.approx(params, rel=0.04), model_id


def test_kv_bytes_per_token_is_two_layers_heads_dims_fp16():
    models = load_models()
    # 2 (K and V) x layers x KV heads x head_dim x 2 bytes
    assert models["llama-2-70b"].kv_bytes_per_token == 2 * 80 * 8 * 128 * 2
    assert models["llama-2-7b"].kv_bytes_per_token == 2 * 32 * 32 * 128 * 2
    assert models["llama-3.2-1b"].kv_bytes_per_token == 2 * 16 * 8 * 64 * 2
    assert models["llama-2-70b"].kv_mib_per_token == pytest.approx(0.3125)


@pytest.mark.parametrize(
    ("phase", "tokens"), [("prefill", 700 * 3), ("draft_decode", 3), ("verify", 3 * 5)]
)
def test_kv_delta_counts_the_appended_tokens(phase, tokens):
    model = gpu_model("llama-2-70b", A100, 4)
    m = SinglePhaseCost(model, phase).evaluate(np.array([700.0]), np.array([3.0]), np.array([4.0]))
    assert m.kv_delta_mb[0] == pytest.approx(tokens * 0.3125)
    assert expected_kv_mb(
        phase, "llama-2-70b", np.array([700.0]), np.array([3.0]), np.array([4.0])
    )[0] == pytest.approx(tokens * 0.3125)


def test_fused_kv_counts_both_models():
    target = gpu_model("llama-2-7b", A100, 1)
    draft = gpu_model("tinyllama-1.1b", A100, 1)
    t = target.shape.kv_mib_per_token
    d = draft.shape.kv_mib_per_token
    c, b, k = np.array([256.0]), np.array([2.0]), np.array([4.0])
    round_kv = FusedRoundCost(target, draft, "x").evaluate(c, b, k).kv_delta_mb[0]
    assert round_kv == pytest.approx(2 * (5 * t + 4 * d))
    prefill_kv = FusedPrefillCost(target, draft, "x").evaluate(c, b, np.ones(1)).kv_delta_mb[0]
    assert prefill_kv == pytest.approx(2 * 256 * (t + d))
    assert expected_kv_mb("fused_decode", "llama-2-7b+tinyllama-1.1b", c, b, k)[0] == pytest.approx(
        round_kv
    )


def test_peak_memory_is_weights_plus_activations_plus_kv():
    model = gpu_model("llama-2-70b", A100, 4)
    c, b = np.array([1024.0]), np.array([16.0])
    m = SinglePhaseCost(model, "draft_decode").evaluate(c, b, np.ones(1))
    weights = model.shape.weight_bytes() / BYTES_PER_MIB
    kv = 16 * 1025 * model.shape.kv_mib_per_token
    assert weights == pytest.approx(2 * model.shape.total_params / BYTES_PER_MIB)
    assert m.peak_mem_mb[0] > weights + kv
    assert m.peak_mem_mb[0] < (weights + kv) * 1.01
    # 138 GB of fp16 weights do not fit on two 80 GB GPUs once a large batch's KV is added.
    assert model.capacity_mb == 4 * 80 * 1024
