"""Per-layer operator times at a batch's token count.

An :class:`OpTimes` answers "how long does operator ``op`` of one transformer
block take on one GPU for a batch of ``n`` tokens" (and the same for the LM
head). Three implementations exist:

* :class:`ProfiledOps` reads a Vidur operator profile of the very model, GPU and
  TP degree (the profiled case);
* :func:`ratio_scaled_profile` moves a profile to another GPU by the per-operator
  time ratio between the two GPUs measured on a reference model of the same
  hidden size (used for Llama-3-8B on H100, profiled on A100 only);
* ``op_roofline.FittedOps`` prices operators of an unprofiled model from a
  roofline fitted to all profiles of the GPU (small draft models).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.inputs import OperatorCurve, OperatorProfile
from lut_population.isotonic import non_decreasing
from lut_population.shapes import ModelShape


class OpTimes(Protocol):
    """Operator times of one model on one GPU at one TP degree."""

    def time_ms(self, op: str, tokens: FloatArray) -> FloatArray:
        """Time of one instance of operator ``op`` for batches of ``tokens`` tokens."""
        ...

    def lm_head_ms(self, tokens: FloatArray) -> FloatArray:
        """Time of the LM head (vocabulary projection) for ``tokens`` tokens."""
        ...


def knots_for(max_tokens: float) -> FloatArray:
    """Smoothing knots: 1, 2, 3, 4, 6, 8, 12, ... (powers of two and 1.5 times them)."""
    top = int(np.ceil(np.log2(max(max_tokens, 1.0))))
    values = {float(2**i) for i in range(top + 1)} | {3.0 * 2 ** (i - 1) for i in range(1, top)}
    return np.asarray(sorted(values), dtype=np.float64)


class MonotoneCurve:
    """A profiled operator curve, smoothed and made non-decreasing.

    The raw medians wiggle from one token count to the next (profiling noise
    and kernel tile effects of a few per cent), which would force thousands of
    LUT grid points for the 2 % interpolation promise. The curve is therefore
    the piecewise-linear function that
    fits the medians best in relative least squares (knots at 1, 2, 3, 4,
    6, 8, 12, ... tokens), with its knot values made
    non-decreasing (pool-adjacent-violators). Between knots it interpolates
    linearly; below one token the first value holds; above the largest
    profiled token count it grows in proportion to the token count (the
    large-batch regime is compute-bound, time proportional to work). The
    relative deviation from the raw medians is kept in :attr:`smoothing_error`.
    """

    def __init__(self, curve: OperatorCurve) -> None:
        raw_tokens = curve.tokens
        raw_time = curve.time_ms
        self.max_tokens = float(raw_tokens[-1])
        knots = knots_for(self.max_tokens)
        knots = knots[knots <= self.max_tokens]
        if knots[-1] < self.max_tokens:
            knots = np.append(knots, self.max_tokens)
        design = np.zeros((raw_tokens.size, knots.size))
        position = np.clip(np.searchsorted(knots, raw_tokens, side="right") - 1, 0, knots.size - 2)
        weight = (raw_tokens - knots[position]) / (knots[position + 1] - knots[position])
        weight = np.clip(weight, 0.0, 1.0)
        rows = np.arange(raw_tokens.size)
        design[rows, position] = 1.0 - weight
        design[rows, position + 1] = weight
        scale = 1.0 / raw_time
        used = design.sum(axis=0) > 0
        values, *_ = np.linalg.lstsq(design[:, used] * scale[:, None], raw_time * scale, rcond=None)
        self.tokens = knots[used]
        self.time_ms = non_decreasing(np.asarray(values, dtype=np.float64))
        fitted = np.interp(raw_tokens, self.tokens, self.time_ms)
        rel = np.abs(fitted - raw_time) / raw_time
        self.smoothing_error = (float(np.median(rel)), float(np.quantile(rel, 0.9)))

    def __call__(self, tokens: FloatArray) -> FloatArray:
        """Time at ``tokens`` tokens."""
        n = np.asarray(tokens, dtype=np.float64)
        inside = np.interp(np.minimum(n, self.max_tokens), self.tokens, self.time_ms)
        scale = np.maximum(n / self.max_tokens, 1.0)
        return np.asarray(inside * scale, dtype=np.float64)


class ProfiledOps:
    """Operator times read from a Vidur profile of the same model, GPU and TP degree.

    The LM head is not profiled; it is the same kind of matrix product as the
    MLP up projection (input width ``hidden_size``, one output row per token),
    so its time is the up projection's at the same token count scaled by the
    ratio of output widths, ``vocab_size / up_width`` (both split over the TP
    degree, so the ratio holds at every degree).
    """

    def __init__(self, profile: OperatorProfile, tensor_parallel: int, shape: ModelShape) -> None:
        if tensor_parallel not in profile.curves:
            raise KeyError(f"{profile.file} has no rows for tensor parallel {tensor_parallel}")
        self.profile = profile
        self.tensor_parallel = tensor_parallel
        self.shape = shape
        self._curves = {op: MonotoneCurve(c) for op, c in profile.curves[tensor_parallel].items()}

    def has(self, op: str) -> bool:
        """Whether the profile has operator ``op`` (phi-2 lacks a post-attention norm)."""
        return op in self._curves

    def time_ms(self, op: str, tokens: FloatArray) -> FloatArray:
        """Profiled time of ``op``; 0 for an operator the architecture does not have."""
        curve = self._curves.get(op)
        if curve is None:
            return np.zeros_like(np.asarray(tokens, dtype=np.float64))
        return curve(tokens)

    def lm_head_ms(self, tokens: FloatArray) -> FloatArray:
        """LM head time: the up projection scaled by ``vocab_size / up_width``."""
        ratio = self.shape.vocab_size / self.shape.up_width
        return self.time_ms("mlp_up_proj", tokens) * ratio


def ratio_scaled_profile(
    base: OperatorProfile, ref_from: OperatorProfile, ref_to: OperatorProfile, gpu: str
) -> OperatorProfile:
    """Move ``base`` (profiled on ``ref_from``'s GPU) to ``gpu`` by per-operator time ratios.

    For every TP degree, operator and profiled token count ``n`` of ``base``::

        time(op, n) = base(op, n) x ref_to(op, m) / ref_from(op, m),  m = min(n, n_ref_max)

    where ``ref_from``/``ref_to`` are the same reference model (of the same
    hidden size) profiled on the source and target GPU, both made
    non-decreasing first. The reference ratio at the same operator and token
    count says how much faster the target GPU runs that kind of kernel at that
    size; beyond the reference's largest token count the last ratio holds.
    The scaled curve is the input of :class:`ProfiledOps` (which makes it
    non-decreasing again).
    """
    curves: dict[int, dict[str, OperatorCurve]] = {}
    for tp, per_op in base.curves.items():
        scaled: dict[str, OperatorCurve] = {}
        for op, curve in per_op.items():
            source = MonotoneCurve(ref_from.curves[tp][op])
            target = MonotoneCurve(ref_to.curves[tp][op])
            m = np.minimum(curve.tokens, source.max_tokens)
            ratio = target(m) / source(m)
            scaled[op] = OperatorCurve(curve.tokens, non_decreasing(curve.time_ms) * ratio)
        curves[tp] = scaled
    file = f"{base.file} x {ref_to.file} / {ref_from.file}"
    return OperatorProfile(gpu, base.model_id, curves, file)
