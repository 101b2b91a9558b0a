"""Operator times of unprofiled models on a datacenter GPU, from a roofline fitted to Vidur profiles.

Small draft models (TinyLlama-1.1B, Llama-68M, Llama-3.2-1B) have no Vidur
profile. Their operators are the same kernels at other sizes, so one model per
GPU is fitted to every profiled operator median of the Llama models on that
GPU (all TP degrees and token counts; phi-2 is held out to measure the error):

* matrix products (QKV, attention output, MLP up, MLP down, and the LM head
  by extension), with per-GPU input width ``K``, output width ``N`` and ``T``
  tokens: ``t = g0 + max(bytes / BW, flops / F)``, ``bytes = 2 (K N + T K + T N)``,
  ``flops = 2 T K N``;
* element-wise operators (embedding lookup, norms, rotary embedding,
  activation, residual add), each its own ``t = e0 + e1 * elements`` with the
  number of elements it touches.

All coefficients are fitted by least squares on relative residuals with
non-negative bounds. The held-out error on phi-2 is reported in the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.optimize import least_squares

from lut_population.arrays import FloatArray
from lut_population.inputs import (
    has_operator_profile,
    load_models,
    load_operator_profile,
)
from lut_population.operators import MonotoneCurve
from lut_population.shapes import ModelShape

FIT_MODELS = ("llama-2-7b", "llama-2-70b", "llama-3-8b")
"""Profiled models the roofline is fitted to (where profiled on the GPU)."""

HOLDOUT_MODEL = "phi-2"
"""Profiled model kept out of the fit to measure its error."""

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE_OPS = (
    "emb",
    "input_layernorm",
    "attn_rope",
    "post_attention_layernorm",
    "mlp_act",
    "add",
)


def gemm_dims(shape: ModelShape, tp: int) -> dict[str, tuple[float, float]]:
    """Per-GPU (input width K, output width N) of the matrix products of ``shape`` at TP ``tp``."""
    return {
        "attn_pre_proj": (shape.hidden_size, shape.qkv_width / tp),
        "attn_post_proj": (shape.attention_width / tp, shape.hidden_size),
        "mlp_up_proj": (shape.hidden_size, shape.up_width / tp),
        "mlp_down_proj": (shape.intermediate_size / tp, shape.hidden_size),
        "lm_head": (shape.hidden_size, shape.vocab_size / tp),
    }


def elementwise_width(shape: ModelShape, tp: int, op: str) -> float:
    """Elements per token an element-wise operator touches on one GPU."""
    if op == "attn_rope":
        return (shape.num_heads + shape.num_kv_heads) * shape.head_dim / tp
    if op == "mlp_act":
        return shape.up_width / tp
    return float(shape.hidden_size)


def _gemm(p: FloatArray, tokens: FloatArray, k: FloatArray, n: FloatArray) -> FloatArray:
    bytes_gb = 2.0 * (k * n + tokens * k + tokens * n) / 1e9
    tflop = 2.0 * tokens * k * n / 1e12
    return np.asarray(p[0] + np.maximum(bytes_gb * p[1], tflop * p[2]))


def _line(p: FloatArray, elements: FloatArray) -> FloatArray:
    return np.asarray(p[0] + p[1] * elements / 1e6)


@dataclass(frozen=True)
class OpRooflineFit:
    """Fitted operator roofline of one GPU.

    Attributes:
        gpu: ``a100`` or ``h100``.
        gemm: ``(g0 ms, ms per GB, ms per TFLOP)``.
        elementwise: ``{op: (e0 ms, ms per million elements)}``.
        fit_error: Median and 90th-percentile relative error over the fitted samples.
        holdout_error: ``{op: median relative error}`` on the held-out model (empty when
            it is not profiled on this GPU).
        holdout_block_error: Relative error of the summed block operators of the held-out
            model at 1, 16, 256 and 2048 tokens.
        models: The models fitted.
        samples: Number of fitted (matrix product, element-wise) samples.
    """

    gpu: str
    gemm: tuple[float, float, float]
    elementwise: dict[str, tuple[float, float]]
    fit_error: tuple[float, float]
    holdout_error: dict[str, float]
    holdout_block_error: dict[int, float]
    models: tuple[str, ...]
    samples: tuple[int, int]

    @property
    def bandwidth_gb_per_s(self) -> float:
        """Effective weight-read bandwidth of matrix products."""
        return 1000.0 / self.gemm[1]

    @property
    def tflop_per_s(self) -> float:
        """Effective matrix-product throughput."""
        return 1000.0 / self.gemm[2]


def _samples(gpu: str, models: tuple[str, ...]) -> dict[str, list[FloatArray]]:
    """Collect (tokens, K, N or width, measured) per operator from the profiles."""
    shapes = load_models()
    out: dict[str, list[FloatArray]] = {}
    for model_id in models:
        profile = load_operator_profile(gpu, model_id)
        shape = shapes[model_id]
        for tp, per_op in profile.curves.items():
            dims = gemm_dims(shape, tp)
            for op, raw in per_op.items():
                curve = MonotoneCurve(raw)
                tokens = curve.tokens
                if op in GEMM_OPS:
                    k, n = dims[op]
                    cols = [tokens, np.full_like(tokens, k), np.full_like(tokens, n)]
                else:
                    width = elementwise_width(shape, tp, op)
                    cols = [tokens, tokens * width, np.zeros_like(tokens)]
                block = np.column_stack([*cols, curve.time_ms])
                out.setdefault(op, []).append(block)
    return out


@cache
def op_roofline_fit(gpu: str) -> OpRooflineFit:
    """Fit the operator roofline of ``gpu`` and measure it on the held-out model."""
    models = tuple(m for m in FIT_MODELS if has_operator_profile(gpu, m))
    samples = _samples(gpu, models)
    gemm_rows = np.vstack([b for op in GEMM_OPS for b in samples[op]])
    t, k, n, y = gemm_rows.T
    gemm = least_squares(
        lambda p: (_gemm(p, t, k, n) - y) / y,
        x0=np.array([0.01, 0.6, 5.0]),
        bounds=(0.0, np.inf),
    ).x
    rel = [np.abs(_gemm(gemm, t, k, n) - y) / y]
    elementwise: dict[str, tuple[float, float]] = {}
    count = 0
    for op in ELEMENTWISE_OPS:
        rows = np.vstack(samples[op])
        elements, measured = rows[:, 1], rows[:, 3]
        p = least_squares(
            lambda q, e=elements, m=measured: (_line(q, e) - m) / m,
            x0=np.array([0.005, 0.001]),
            bounds=(0.0, np.inf),
        ).x
        elementwise[op] = (float(p[0]), float(p[1]))
        rel.append(np.abs(_line(p, elements) - measured) / measured)
        count += rows.shape[0]
    all_rel = np.concatenate(rel)
    fit = OpRooflineFit(
        gpu=gpu,
        gemm=(float(gemm[0]), float(gemm[1]), float(gemm[2])),
        elementwise=elementwise,
        fit_error=(float(np.median(all_rel)), float(np.quantile(all_rel, 0.9))),
        holdout_error={},
        holdout_block_error={},
        models=models,
        samples=(int(gemm_rows.shape[0]), count),
    )
    if not has_operator_profile(gpu, HOLDOUT_MODEL):
        return fit
    return _with_holdout(fit)


def _with_holdout(fit: OpRooflineFit) -> OpRooflineFit:
    shape = load_models()[HOLDOUT_MODEL]
    profile = load_operator_profile(fit.gpu, HOLDOUT_MODEL)
    ops = FittedOps(fit, shape, 1)
    per_op: dict[str, float] = {}
    measured_total: dict[int, float] = {}
    predicted_total: dict[int, float] = {}
    probe = np.array([1.0, 16.0, 256.0, 2048.0])
    for op, raw in profile.curves[1].items():
        curve = MonotoneCurve(raw)
        predicted = ops.time_ms(op, curve.tokens)
        per_op[op] = float(np.median(np.abs(predicted - curve.time_ms) / curve.time_ms))
        weight = 2.0 if op == "add" else 1.0
        if op != "emb":
            for i, x in enumerate(probe):
                xs = np.array([x])
                measured_total[i] = measured_total.get(i, 0.0) + weight * float(curve(xs)[0])
                predicted_total[i] = predicted_total.get(i, 0.0) + weight * float(
                    ops.time_ms(op, xs)[0]
                )
    block = {int(x): predicted_total[i] / measured_total[i] - 1.0 for i, x in enumerate(probe)}
    return OpRooflineFit(
        gpu=fit.gpu,
        gemm=fit.gemm,
        elementwise=fit.elementwise,
        fit_error=fit.fit_error,
        holdout_error=per_op,
        holdout_block_error=block,
        models=fit.models,
        samples=fit.samples,
    )


class FittedOps:
    """Operator times of any model shape from an :class:`OpRooflineFit`."""

    def __init__(self, fit: OpRooflineFit, shape: ModelShape, tensor_parallel: int) -> None:
        self.fit = fit
        self.shape = shape
        self.tensor_parallel = tensor_parallel
        self._dims = gemm_dims(shape, tensor_parallel)

    def time_ms(self, op: str, tokens: FloatArray) -> FloatArray:
        """Fitted time of ``op`` for ``tokens`` tokens."""
        t = np.asarray(tokens, dtype=np.float64)
        if op in self._dims:
            k, n = self._dims[op]
            p = np.asarray(self.fit.gemm)
            return _gemm(p, t, np.full_like(t, k), np.full_like(t, n))
        e = np.asarray(self.fit.elementwise[op])
        return _line(e, t * elementwise_width(self.shape, self.tensor_parallel, op))

    def lm_head_ms(self, tokens: FloatArray) -> FloatArray:
        """Fitted LM-head time (a matrix product of width ``vocab_size / tp``)."""
        return self.time_ms("lm_head", tokens)
