"""Roofline devices: calibration to measured tokens/s, held-out facts, balance, op roofline."""

from __future__ import annotations

import numpy as np
import pytest

from lut_population.device_roofline import (
    RooflineModel,
    balance,
    calibrate,
    cited_number,
    decode_bytes,
    fact_row,
)
from lut_population.inputs import load_models, load_quant_formats
from lut_population.op_roofline import op_roofline_fit
from lut_population.plan import device_model
from lut_population.work import Work
from simulator.errors import InputError

DEVICES = ("iphone-16-pro", "rtx-4050-laptop", "macbook-m3-max", "jetson-orin-nano-super")


def decode(batch: float, context: float) -> Work:
    return Work(np.array([batch]), np.array([1.0]), np.array([context]), np.array([1.0]))


@pytest.mark.parametrize("hardware", DEVICES)
def test_calibration_reproduces_the_fact_it_was_fitted_to(hardware):
    cal = calibrate(hardware)
    fitted = [c for c in cal.checks if c.fitted]
    assert len(fitted) == 1
    assert fitted[0].error == pytest.approx(0.0, abs=1e-12)
    assert cal.tflop_per_s == pytest.approx(balance().flop_per_byte * cal.bandwidth_gb_per_s / 1000)


def test_effective_bandwidth_is_tokens_per_second_times_bytes():
    # RTX 4050 Laptop: Qwen2.5-1.5B-Instruct, GPTQ int4, 131.7 tok/s (TinyBench row).
    shape = load_models()["qwen2.5-1.5b"]
    fmt = load_quant_formats()["GPTQ_INT4"]
    blocks = shape.num_layers * shape.block_params * fmt.block_bits / 8
    head = shape.vocab_size * shape.hidden_size * 2  # tied fp16 embedding used as LM head
    assert decode_bytes(shape, "GPTQ_INT4", 0) == pytest.approx(blocks + head)
    cal = calibrate("rtx-4050-laptop")
    assert cal.bandwidth_gb_per_s == pytest.approx(131.7 * (blocks + head) / 1e9)
    # The laptop GPU's effective bandwidth lands below its 192 GB/s memory system.
    assert 100 < cal.bandwidth_gb_per_s < 192


def test_jetson_held_out_fact_is_predicted_within_ten_percent():
    cal = calibrate("jetson-orin-nano-super")
    held = [c for c in cal.checks if not c.fitted]
    assert [c.model for c in held] == ["llama-3-8b"]
    assert held[0].measured_tok_s == 19.14
    assert abs(held[0].error) < 0.10
    # Effective bandwidth stays below the board's 102 GB/s.
    assert 50 < cal.bandwidth_gb_per_s < 102


def test_fp16_decode_on_a_device_is_bandwidth_bound():
    model = device_model("tinyllama-1.1b", "iphone-16-pro")
    shape = model.shape
    work = decode(1.0, 128.0)
    bytes_moved = shape.decode_read_bytes() + 129 * shape.kv_bytes_per_token
    expected_ms = bytes_moved / (model.calibration.bandwidth_gb_per_s * 1e9) * 1000
    assert model.latency_ms(work)[0] == pytest.approx(expected_ms)
    # About 2.2 GB of fp16 weights at ~35 GB/s: tens of milliseconds per token.
    assert 40 < expected_ms < 90


def test_prefill_on_a_device_is_compute_bound():
    model: RooflineModel = device_model("llama-3.2-1b", "macbook-m3-max")
    work = Work(np.array([1.0]), np.array([1024.0]), np.array([0.0]), np.array([1.0]))
    compute_ms = model.flops(work)[0] / (model.calibration.tflop_per_s * 1e12) * 1000
    memory_ms = model.bytes_moved(work)[0] / (model.calibration.bandwidth_gb_per_s * 1e9) * 1000
    assert compute_ms > memory_ms
    assert model.latency_ms(work)[0] == pytest.approx(compute_ms)


def test_balance_comes_from_devices_with_both_rates():
    bal = balance()
    assert len(bal.rows) == 8
    assert min(r.balance for r in bal.rows) <= bal.flop_per_byte <= max(r.balance for r in bal.rows)
    assert all(abs(r.loo_error) < 0.6 for r in bal.rows)
    rtx3090 = next(r for r in bal.rows if r.device == "RTX 3090 24GB" and r.quant == "Q4_K_M")
    assert rtx3090.bandwidth_gb_per_s == pytest.approx(
        111.74 * decode_bytes(load_models()["llama-3-8b"], "Q4_K_M", 512) / 1e9
    )


def test_cited_numbers_must_be_in_the_cell():
    row = fact_row("iPhone 16 Pro (A18 Pro GPU)", "Q4_0")
    assert cited_number(row, "decode_tok_s", 40.0, "x") == 40.0
    assert cited_number(row, "decode_tok_s", 22.6, "x") == 22.6
    with pytest.raises(InputError, match="not found in the cited cell"):
        cited_number(row, "decode_tok_s", 41.0, "roofline.iphone-16-pro.decode_tok_s")


def test_devices_without_power_data_say_so():
    assert calibrate("iphone-16-pro").power_w is None
    assert calibrate("rtx-4050-laptop").power_w == 34.1
    assert calibrate("macbook-m3-max").memory_mb == 64 * 1024


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_operator_roofline_fit_and_held_out_model(gpu):
    fit = op_roofline_fit(gpu)
    assert "phi-2" not in fit.models
    assert fit.fit_error[0] < 0.15
    # Matrix products dominate the block time; on the held-out phi-2 they stay within 15 %.
    for op in ("attn_pre_proj", "mlp_up_proj", "mlp_down_proj"):
        assert fit.holdout_error[op] < 0.15
    assert abs(fit.holdout_block_error[1]) < 0.1
    assert 1000 < fit.bandwidth_gb_per_s < 3500
