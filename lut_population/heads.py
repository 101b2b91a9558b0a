"""One draft-head step on the target's GPUs, composed from the target's operator times.

A head (:class:`~lut_population.head_specs.HeadSpec`) runs on the target's
replica at the target's TP degree and shapes, so every term is an operator of
the target's :class:`~lut_population.gpu_compose.ComposedGpuModel` (the same
Vidur operator curves, attention model and all-reduce fit the target's rows
use). For ``T`` new tokens (``batch x new``) and ``L`` LM-head rows
(``batch x logits``)::

    EAGLE, EAGLE-3, MTP (per depth, ``depth`` times in sequence):
        embedding(T)                                  (the target's token embedding)
      + fc_inputs x attn_post_proj(T)                 (input fc, fc_inputs x h -> h)
      + decoder_layers x [ block(T) + (qkv_inputs - 1) x attn_pre_proj(T)
                           + attention(batch, new, cached) + all-reduces(T) ]
      + final_norm(T) + lm_head(L) x lm_head_vocab / target vocab
    Medusa:
        lm_heads x [ residual_blocks x (attn_post_proj(L) + 2 x add(L)) + lm_head(L) ]

Scaling rules, the same as the LM head's in section 4.3 of PLAN.md: a matrix
product of input width ``a x K`` and the same output width as a profiled one of
input width ``K`` costs ``a`` times it at the same token count (``attn_post_proj``
maps the per-GPU attention width, h / t, to h; the input fc maps
``fc_inputs x h / t`` to h when split like it); the LM head over a reduced
vocabulary costs the target's LM head times the vocabulary ratio. A Medusa
residual block's h -> h linear is an ``attn_post_proj``-sized product (h
/ t x h per GPU) and its SiLU and residual add are two element-wise
operators of hidden width (Vidur's ``add``). A Medusa step runs on the logit
positions only; it has no attention and no KV cache.

EAGLE-3 runs its fc in the first step of a round only (the one that reads the
target's features); :meth:`HeadGpuModel.later_step` prices the others.

A head step over ``w`` candidates per sequence (one level of a token tree) is
the work ``(batch, new = w, cached = context, logits = w)``: the matrix products
and LM head see ``batch x w`` tokens, the attention reads each sequence's
context once. A head file's ``draft_decode`` rows are ``w = 1`` (a chain step)
and its ``verify`` rows ``w = fanout_k + 1`` (PLAN.md section 4.8). Host time is
not included (LUT rows are GPU time).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.gpu_compose import ComposedGpuModel
from lut_population.head_specs import HeadSpec
from lut_population.inputs import load_heads, load_models
from lut_population.shapes import BYTES_PER_MIB, FP16_BYTES, ModelShape
from lut_population.work import Work, fp16_activations_mb


def head_shape(spec: HeadSpec, target: ModelShape) -> ModelShape:
    """The head as a model shape: the target's widths, the head's layers and LM-head vocabulary.

    ``num_layers`` is the layers holding a KV cache (``decoder_layers x depth``;
    0 for Medusa), so the KV formulas of :mod:`lut_population.work` hold.
    """
    return replace(
        target,
        model_id=spec.model_id,
        name=spec.name,
        num_layers=spec.decoder_layers * spec.depth,
        vocab_size=spec.lm_head_vocab,
        source=spec.source,
    )


def shapes_with_heads() -> dict[str, ModelShape]:
    """Every model shape of ``models.yaml`` plus every head of ``heads.yaml`` as a shape."""
    models = dict(load_models())
    for head_id, spec in load_heads().items():
        models[head_id] = head_shape(spec, models[spec.target])
    return models


@dataclass
class HeadGpuModel:
    """Iteration costs of a draft head on its target's replica.

    Attributes:
        spec: The head.
        target: The target's composed model (operators, attention, all-reduce, power).
        shape: The head as a model shape (:func:`head_shape`).
        source: The ``source`` tag of the rows.
    """

    spec: HeadSpec
    target: ComposedGpuModel
    shape: ModelShape
    source: str

    @property
    def tensor_parallel(self) -> int:
        """The target's TP degree."""
        return self.target.tensor_parallel

    @property
    def capacity_mb(self) -> float | None:
        """The target replica's memory."""
        return self.target.capacity_mb

    def later_step(self) -> HeadGpuModel:
        """The model of a draft step after the first of a round.

        EAGLE-3 runs its fc only on the target's features, i.e. in the first
        step of a round; later steps feed the layer the head's own output. For
        every other kind a later step costs the same as the first.
        """
        if self.spec.fc_each_step or self.spec.fc_inputs == 0:
            return self
        return replace(self, spec=replace(self.spec, fc_inputs=0))

    def _lm_head_ms(self, rows: FloatArray) -> FloatArray:
        ratio = self.spec.lm_head_vocab / self.target.shape.vocab_size
        return np.asarray(self.target.ops.lm_head_ms(rows) * ratio)

    def layer_ms(self, work: Work) -> FloatArray:
        """One decoder layer of the head (wider QKV input for EAGLE-3), attention and all-reduces."""
        tokens = work.tokens
        ops = self.target.ops
        return np.asarray(
            self.target.block_ms(tokens)
            + (self.spec.qkv_inputs - 1) * ops.time_ms("attn_pre_proj", tokens)
            + self.target.attention.time_ms(work.batch, work.new, work.cached)
            + self.target.all_reduce_ms(tokens)
        )

    def _medusa_ms(self, work: Work) -> FloatArray:
        rows = work.logit_rows
        ops = self.target.ops
        block = ops.time_ms("attn_post_proj", rows) + 2.0 * ops.time_ms("add", rows)
        per_head = self.spec.residual_blocks * block + self._lm_head_ms(rows)
        return np.asarray(self.spec.lm_heads * per_head)

    def latency_ms(self, work: Work) -> FloatArray:
        """GPU time of one head step (see the module docstring)."""
        if self.spec.kind == "medusa":
            return self._medusa_ms(work)
        tokens = work.tokens
        ops = self.target.ops
        module = (
            ops.time_ms("emb", tokens)
            + self.spec.fc_inputs * ops.time_ms("attn_post_proj", tokens)
            + self.spec.decoder_layers * self.layer_ms(work)
            + ops.time_ms("input_layernorm", tokens)
            + self.spec.lm_heads * self._lm_head_ms(work.logit_rows)
        )
        return np.asarray(self.spec.depth * module)

    def power_w(self, work: Work) -> FloatArray | None:
        """The target replica's power at the step's token count."""
        return self.target.power_w(work)

    def weights_mb(self) -> float:
        """fp16 weights the head adds to the target's (its fc, layers and own LM heads)."""
        h = self.shape.hidden_size
        spec = self.spec
        layer = self.shape.block_params + (spec.qkv_inputs - 1) * h * self.shape.qkv_width
        per_depth = spec.fc_inputs * h * h + spec.decoder_layers * layer
        params = spec.depth * per_depth + spec.lm_heads * spec.residual_blocks * h * h
        if spec.own_lm_head:
            params += spec.lm_heads * spec.lm_head_vocab * h
        return params * FP16_BYTES / BYTES_PER_MIB

    def activations_mb(self, work: Work) -> FloatArray:
        """Live activations of the step (the target's per-token widths, the head's vocabulary)."""
        return fp16_activations_mb(self.shape, work, self.tensor_parallel)
