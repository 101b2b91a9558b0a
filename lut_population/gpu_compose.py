"""Iteration latency on a datacenter GPU, composed from per-operator times.

For a batch with ``T`` new tokens (``T = batch x new``) on a replica of TP
degree ``t``::

    latency = layers x [ sum of block operators(T)          (norms, QKV, rotary,
                                                             attention output, MLP
                                                             up/act/down, 2 residual adds)
                         + attention(batch, new, cached)    (per GPU shard)
                         + 2 x all_reduce(T x hidden x 2 B) (only when t > 1) ]
              + embedding(T) + final norm(T) + LM head(batch x logits)
              + host overhead(batch, batch x logits)

Block operators come from an :class:`~lut_population.operators.OpTimes`
(profiled, ratio-scaled or roofline-fitted), attention from
:class:`~lut_population.attention.AttentionModel`, all-reduce from
:class:`~lut_population.collectives.AllReduceFit`. Pipeline parallelism is
not modelled (every LUT has pipeline_parallel = 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.attention import AttentionModel
from lut_population.collectives import AllReduceFit
from lut_population.operators import OpTimes
from lut_population.power import PowerCurve
from lut_population.shapes import BYTES_PER_MIB, FP16_BYTES, ModelShape
from lut_population.work import Work, fp16_activations_mb

BLOCK_OPS: tuple[tuple[str, float], ...] = (
    ("input_layernorm", 1.0),
    ("attn_pre_proj", 1.0),
    ("attn_rope", 1.0),
    ("attn_post_proj", 1.0),
    ("post_attention_layernorm", 1.0),
    ("mlp_up_proj", 1.0),
    ("mlp_act", 1.0),
    ("mlp_down_proj", 1.0),
    ("add", 2.0),
)
"""Operators of one transformer block and how often each runs (two residual adds)."""

ALL_REDUCES_PER_LAYER = 2
"""Tensor-parallel all-reduces per block: after the attention output and after the MLP."""


@dataclass
class ComposedGpuModel:
    """Iteration costs of one model on a datacenter GPU replica (PP = 1).

    Attributes:
        shape: The model.
        tensor_parallel: TP degree of the replica.
        ops: Per-layer operator times.
        attention: Per-layer attention time of one GPU shard.
        all_reduce: All-reduce model (None at TP 1).
        power: Per-GPU power curve.
        capacity_mb: Replica memory (TP x GPU memory), for flagging rows that do not fit.
        source: The ``source`` tag of the rows.
    """

    shape: ModelShape
    tensor_parallel: int
    ops: OpTimes
    attention: AttentionModel
    all_reduce: AllReduceFit | None
    power: PowerCurve
    capacity_mb: float | None
    source: str

    def block_ms(self, tokens: FloatArray) -> FloatArray:
        """Time of one transformer block's operators (attention kernel and all-reduces excluded)."""
        total = np.zeros_like(np.asarray(tokens, dtype=np.float64))
        for op, times in BLOCK_OPS:
            total = total + times * self.ops.time_ms(op, tokens)
        return np.asarray(total)

    def all_reduce_ms(self, tokens: FloatArray) -> FloatArray:
        """All-reduce time of one block (zero at TP 1)."""
        if self.all_reduce is None:
            return np.zeros_like(np.asarray(tokens, dtype=np.float64))
        size = tokens * self.shape.hidden_size * FP16_BYTES
        return np.asarray(ALL_REDUCES_PER_LAYER * self.all_reduce.time_ms(size))

    def latency_ms(self, work: Work) -> FloatArray:
        """Composed iteration latency (see the module docstring)."""
        tokens = work.tokens
        layer = (
            self.block_ms(tokens)
            + self.attention.time_ms(work.batch, work.new, work.cached)
            + self.all_reduce_ms(tokens)
        )
        once = (
            self.ops.time_ms("emb", tokens)
            + self.ops.time_ms("input_layernorm", tokens)
            + self.ops.lm_head_ms(work.logit_rows)
        )
        return np.asarray(self.shape.num_layers * layer + once)

    def power_w(self, work: Work) -> FloatArray | None:
        """Replica power: per-GPU power at the iteration's token count times the TP degree."""
        return np.asarray(self.power.power_w_per_gpu(work.tokens) * self.tensor_parallel)

    def weights_mb(self) -> float:
        """fp16 weights of the whole model (split over the replica's GPUs)."""
        return self.shape.weight_bytes() / BYTES_PER_MIB

    def activations_mb(self, work: Work) -> FloatArray:
        """Live fp16 activations plus fp32 logits, summed over the replica."""
        return fp16_activations_mb(self.shape, work, self.tensor_parallel)
