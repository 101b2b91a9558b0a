"""Model shapes and the sizes derived from them (parameters, weight bytes, KV bytes, FLOPs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lut_population.arrays import FloatArray

BYTES_PER_MIB = 1024.0 * 1024.0
"""LUT megabytes are mebibytes (the simulator counts 1024 MB per GB)."""

FP16_BYTES = 2
"""Bytes of one fp16 value (weights, activations and KV cache of every LUT are fp16)."""


@dataclass(frozen=True)
class ModelShape:
    """The architecture of one decoder-only transformer.

    Attributes:
        model_id: The model id used in LUT files (e.g. ``llama-2-7b``).
        name: The public checkpoint name.
        num_layers: Transformer blocks.
        hidden_size: Residual width.
        num_heads: Query heads.
        num_kv_heads: Key/value heads (fewer than ``num_heads`` with grouped-query attention).
        head_dim: Width of one head.
        intermediate_size: MLP inner width.
        vocab_size: Vocabulary size (rows of the embedding and of the LM head).
        gated_mlp: Whether the MLP is gated (three matrices) rather than two.
        tied_embeddings: Whether the LM head shares the embedding matrix.
        max_context: Longest supported context, in tokens.
        source: Where the shape comes from.
    """

    model_id: str
    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    gated_mlp: bool
    tied_embeddings: bool
    max_context: int
    source: str

    @property
    def qkv_width(self) -> int:
        """Output width of the fused query/key/value projection."""
        return (self.num_heads + 2 * self.num_kv_heads) * self.head_dim

    @property
    def attention_width(self) -> int:
        """Width of the concatenated attention heads (input of the output projection)."""
        return self.num_heads * self.head_dim

    @property
    def up_width(self) -> int:
        """Output width of the MLP up projection (gate and up fused when gated)."""
        return (2 if self.gated_mlp else 1) * self.intermediate_size

    @property
    def block_params(self) -> int:
        """Matrix parameters of one transformer block (norm vectors are negligible and omitted)."""
        attention = self.hidden_size * self.qkv_width + self.attention_width * self.hidden_size
        mlp = self.hidden_size * self.up_width + self.intermediate_size * self.hidden_size
        return attention + mlp

    @property
    def embedding_params(self) -> int:
        """Parameters of the token embedding."""
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Parameters of the LM head matrix (shared with the embedding when tied)."""
        return self.vocab_size * self.hidden_size

    @property
    def total_params(self) -> int:
        """All matrix parameters stored (the LM head counts once when tied)."""
        head = 0 if self.tied_embeddings else self.lm_head_params
        return self.num_layers * self.block_params + self.embedding_params + head

    def weight_bytes(self, block_bits: float = 16.0, embedding_bits: float = 16.0) -> float:
        """Bytes of stored weights at the given bits per weight.

        Args:
            block_bits: Bits per weight of the transformer-block matrices.
            embedding_bits: Bits per weight of the embedding and LM head matrices.
        """
        head = 0 if self.tied_embeddings else self.lm_head_params
        return (
            self.num_layers * self.block_params * block_bits
            + (self.embedding_params + head) * embedding_bits
        ) / 8.0

    def decode_read_bytes(self, block_bits: float = 16.0, embedding_bits: float = 16.0) -> float:
        """Weight bytes one decode step reads: every block matrix and the LM head.

        The embedding lookup reads one row per token, which is negligible; with
        tied embeddings the LM head is the embedding matrix.
        """
        return (
            self.num_layers * self.block_params * block_bits + self.lm_head_params * embedding_bits
        ) / 8.0

    @property
    def kv_bytes_per_token(self) -> int:
        """fp16 KV cache bytes one token of context occupies (all layers, keys and values)."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * FP16_BYTES

    @property
    def kv_mib_per_token(self) -> float:
        """:attr:`kv_bytes_per_token` in MiB."""
        return self.kv_bytes_per_token / BYTES_PER_MIB

    @property
    def matmul_flops_per_token(self) -> int:
        """FLOPs of the block matrices for one token (2 per multiply-add), LM head excluded."""
        return 2 * self.num_layers * self.block_params

    @property
    def lm_head_flops_per_token(self) -> int:
        """FLOPs of the LM head for one token."""
        return 2 * self.lm_head_params

    def attention_flops(self, new_tokens: FloatArray, context_before: FloatArray) -> FloatArray:
        """Attention score and value FLOPs of ``new_tokens`` queries of one sequence, all layers.

        Each new token attends to the ``context_before`` cached tokens and to the
        new tokens before it (causal), ``4 * heads * head_dim`` FLOPs per
        (query, key) pair (QK^T and PV).
        """
        pairs = new_tokens * context_before + new_tokens * (new_tokens + 1.0) / 2.0
        return np.asarray(4.0 * self.num_layers * self.num_heads * self.head_dim * pairs)
