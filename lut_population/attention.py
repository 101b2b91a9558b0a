"""Attention time per layer, fitted to the one Vidur attention profile and scaled from it.

The only attention measurement is Vidur's A100 FlashAttention table for a
per-GPU shape of 32 query heads, 4 KV heads and head width 128 (a 64-head /
8-KV-head model at TP 2). Two least-squares fits (relative residuals) turn it
into a cost model that can be moved to other shapes and GPUs:

* memory-bound part (decode rows): ``t_mem = max(m0, m1 + m2 * GB_read)`` with
  ``GB_read = batch x cached tokens x 2 x kv_heads x head_dim x 2 bytes``, the
  KV cache one layer reads;
* compute-bound part (prefill rows): ``t_cmp = c0 + batch x (c1 * TFLOP + c2 *
  chunk / 1000)`` with ``TFLOP = 4 x heads x head_dim x (chunk x cached +
  chunk (chunk + 1) / 2) / 1e12`` per sequence (causal QK^T and PV).

An attention call of ``batch`` sequences, each adding ``new`` tokens to
``cached`` tokens, costs ``max(t_mem, t_cmp)`` (a roofline: decode is
bandwidth-bound, prefill compute-bound, and a verify pass of k + 1 tokens
lands on whichever is larger). Another model or TP degree enters only through
its per-GPU heads, KV heads and head width in the bytes and FLOPs. Another GPU
enters through two ratios measured on the Vidur operator profiles of the same
models on both GPUs (:mod:`lut_population.gpu_scaling`): the memory-bound part
is multiplied by the bandwidth-bound ratio, the compute-bound part by the
compute-bound ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from lut_population.arrays import FloatArray
from lut_population.inputs import AttentionProfile

BYTES_PER_GB = 1e9
FLOPS_PER_TFLOP = 1e12


def kv_gb(batch: FloatArray, tokens: FloatArray, kv_heads: float, head_dim: float) -> FloatArray:
    """GB of fp16 keys and values one layer reads for ``batch`` sequences of ``tokens`` tokens."""
    return np.asarray(batch * tokens * 2.0 * kv_heads * head_dim * 2.0 / BYTES_PER_GB)


def attention_tflop(
    new: FloatArray, cached: FloatArray, heads: float, head_dim: float
) -> FloatArray:
    """TFLOP of one layer's causal attention for one sequence adding ``new`` to ``cached`` tokens."""
    pairs = new * cached + new * (new + 1.0) / 2.0
    return np.asarray(4.0 * heads * head_dim * pairs / FLOPS_PER_TFLOP)


@dataclass(frozen=True)
class AttentionFit:
    """Fitted coefficients of the A100 attention profile, and how well they fit.

    Attributes:
        mem: ``(m0, m1, m2)`` of the memory-bound part (ms, ms, ms per GB).
        cmp: ``(c0, c1, c2)`` of the compute-bound part (ms, ms per TFLOP, ms per 1000 tokens).
        decode_error: Median and 90th-percentile relative error on the decode rows.
        prefill_error: Median and 90th-percentile relative error on the prefill rows.
        rows: Number of (decode, prefill) rows fitted.
    """

    mem: tuple[float, float, float]
    cmp: tuple[float, float, float]
    decode_error: tuple[float, float]
    prefill_error: tuple[float, float]
    rows: tuple[int, int]

    @property
    def bandwidth_gb_per_s(self) -> float:
        """Effective KV-read bandwidth implied by ``m2``."""
        return 1000.0 / self.mem[2]

    @property
    def tflop_per_s(self) -> float:
        """Effective attention throughput implied by ``c1``."""
        return 1000.0 / self.cmp[1]


def _mem(p: FloatArray, gb: FloatArray) -> FloatArray:
    return np.asarray(np.maximum(p[0], p[1] + p[2] * gb))


def _cmp(p: FloatArray, batch: FloatArray, tflop: FloatArray, chunk: FloatArray) -> FloatArray:
    return np.asarray(p[0] + batch * (p[1] * tflop + p[2] * chunk / 1000.0))


def _errors(model: FloatArray, measured: FloatArray) -> tuple[float, float]:
    rel = np.abs(model - measured) / measured
    return float(np.median(rel)), float(np.quantile(rel, 0.9))


def fit_attention(profile: AttentionProfile) -> AttentionFit:
    """Fit the memory- and compute-bound parts to the profile (relative least squares)."""
    gb = kv_gb(
        profile.decode_batch,
        profile.decode_context,
        profile.kv_heads_per_gpu,
        profile.head_dim,
    )
    measured = profile.decode_ms
    mem = least_squares(
        lambda p: (_mem(p, gb) - measured) / measured,
        x0=np.array([0.015, 0.01, 0.6]),
        bounds=(0.0, np.inf),
    ).x
    chunk = profile.prefill_chunk
    tflop = attention_tflop(chunk, profile.prefill_context, profile.heads_per_gpu, profile.head_dim)
    ones = np.ones_like(chunk)
    pre = profile.prefill_ms
    cmp = least_squares(
        lambda p: (_cmp(p, ones, tflop, chunk) - pre) / pre,
        x0=np.array([0.01, 10.0, 0.1]),
        bounds=(0.0, np.inf),
    ).x
    return AttentionFit(
        mem=(float(mem[0]), float(mem[1]), float(mem[2])),
        cmp=(float(cmp[0]), float(cmp[1]), float(cmp[2])),
        decode_error=_errors(_mem(mem, gb), measured),
        prefill_error=_errors(_cmp(cmp, ones, tflop, chunk), pre),
        rows=(int(measured.size), int(pre.size)),
    )


@dataclass(frozen=True)
class AttentionModel:
    """Per-layer attention time of one model shard on one GPU.

    Attributes:
        fit: The A100 fit.
        heads: Query heads per GPU.
        kv_heads: KV heads per GPU.
        head_dim: Head width.
        mem_ratio: Multiplier of the memory-bound part (1 on A100).
        cmp_ratio: Multiplier of the compute-bound part (1 on A100).
    """

    fit: AttentionFit
    heads: float
    kv_heads: float
    head_dim: float
    mem_ratio: float = 1.0
    cmp_ratio: float = 1.0

    def time_ms(self, batch: FloatArray, new: FloatArray, cached: FloatArray) -> FloatArray:
        """Time of one layer's attention for ``batch`` sequences adding ``new`` to ``cached`` tokens."""
        m = np.asarray(self.fit.mem, dtype=np.float64)
        c = np.asarray(self.fit.cmp, dtype=np.float64)
        gb = kv_gb(batch, cached + new, self.kv_heads, self.head_dim)
        tflop = attention_tflop(new, cached, self.heads, self.head_dim)
        memory = _mem(m, gb) * self.mem_ratio
        compute = _cmp(c, batch, tflop, new) * self.cmp_ratio
        return np.asarray(np.maximum(memory, compute))
