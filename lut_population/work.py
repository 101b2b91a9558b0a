"""What one iteration does, and what it costs.

A :class:`Work` describes one iteration of a batch: ``batch`` sequences, each
adding ``new`` tokens on top of ``cached`` tokens already in the KV cache, with
``logits`` positions per sequence that need a next-token distribution. All
fields are numpy arrays (broadcast together), so a whole LUT grid is priced in
one call. An :class:`IterationModel` turns work into latency, power and memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.shapes import BYTES_PER_MIB, ModelShape


@dataclass(frozen=True)
class Work:
    """One iteration of a batch (arrays broadcast together).

    Attributes:
        batch: Sequences in the batch.
        new: Tokens each sequence adds (prompt chunk, 1 for decode, k + 1 for verify).
        cached: Tokens each sequence already has in the KV cache.
        logits: Positions per sequence that need the LM head.
    """

    batch: FloatArray
    new: FloatArray
    cached: FloatArray
    logits: FloatArray

    @property
    def tokens(self) -> FloatArray:
        """New tokens in the whole batch."""
        return np.asarray(self.batch * self.new)

    @property
    def logit_rows(self) -> FloatArray:
        """LM-head rows in the whole batch."""
        return np.asarray(self.batch * self.logits)


class IterationModel(Protocol):
    """Cost of iterations of one model on one device (or replica)."""

    @property
    def shape(self) -> ModelShape:
        """The model."""
        ...

    @property
    def tensor_parallel(self) -> int:
        """TP degree (1 on client devices)."""
        ...

    @property
    def capacity_mb(self) -> float | None:
        """Memory of the replica or device, or None when unknown."""
        ...

    @property
    def source(self) -> str:
        """The ``source`` tag of rows priced by this model."""
        ...

    def latency_ms(self, work: Work) -> FloatArray:
        """Wall-clock time of the iteration."""
        ...

    def power_w(self, work: Work) -> FloatArray | None:
        """Power drawn during the iteration (all devices of the replica); None if unknown."""
        ...

    def weights_mb(self) -> float:
        """Memory the weights occupy (all devices of the replica)."""
        ...

    def activations_mb(self, work: Work) -> FloatArray:
        """Peak memory of live activations during the iteration (all devices)."""
        ...


def kv_total_mb(shape: ModelShape, work: Work) -> FloatArray:
    """KV cache held by the batch after the iteration (all layers, all devices)."""
    return np.asarray(work.batch * (work.cached + work.new) * shape.kv_mib_per_token)


def kv_delta_mb(shape: ModelShape, work: Work) -> FloatArray:
    """KV cache the iteration adds: ``batch x new x 2 x layers x kv_heads x head_dim x 2 bytes``."""
    return np.asarray(work.batch * work.new * shape.kv_mib_per_token)


def fp16_activations_mb(shape: ModelShape, work: Work, tensor_parallel: int) -> FloatArray:
    """Live activation memory of one iteration, summed over the replica's GPUs.

    Per GPU: the residual stream and its normalised copy (``2 x hidden``) plus
    the widest intermediate (QKV or MLP up output, split over the TP degree)
    for every new token, in fp16, plus the fp32 logits of the LM-head rows
    (vocabulary split over the TP degree). Attention workspace is left out.
    """
    tp = float(tensor_parallel)
    widest = max(shape.qkv_width, shape.up_width) / tp
    per_token = 2.0 * (2.0 * shape.hidden_size + widest)
    logits = 4.0 * shape.vocab_size / tp
    per_gpu = work.tokens * per_token + work.logit_rows * logits
    return np.asarray(per_gpu * tp / BYTES_PER_MIB)
