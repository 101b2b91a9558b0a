"""A Llama-architecture decoder in plain PyTorch, and the step of every grid point.

This is the method of the project's H100 microbenchmarks
(``microbench_h100/README.md``), with plain PyTorch element-wise operations
where that run used three Triton kernels (fused add + RMSNorm, rotary fused
with the KV write, SiLU x up); that README measured the plain-op version at
+22 % (Llama-2-7B) to +61 % (Llama-68M) of the Triton one at batch 1.

Per layer: RMSNorm, one QKV matrix product (grouped-query attention), rotary
embedding of queries and keys, the keys and values written into a
preallocated contiguous KV cache ``[batch, kv_heads, max_len, head_dim]``,
``scaled_dot_product_attention`` over the cached and new tokens (flash
backend forced on CUDA), output projection, residual add + RMSNorm, one
gate/up matrix product, SiLU(gate) x up, down projection, residual add. The
final norm and LM head run only on the positions that need logits, then a
greedy argmax. Prefill uses a causal mask; decode needs none; verify and head
steps use no mask inside the new block (as the H100 ``graph`` verify rows;
a causal block cost +0.5-5.7 % there).

The EAGLE-style head step: ``concat(token embedding, hidden state)``, a
``2 hidden -> hidden`` linear map, one decoder layer with its own KV cache,
the final norm, the LM head on every new position, argmax.

Weights are random (latency does not depend on their values), drawn with a
fixed seed and scaled by ``1 / sqrt(fan_in)`` so activations stay finite.
This module imports PyTorch; import it only when a measurement runs.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from lut_population.profile.points import HEAD, Point
from lut_population.profile.timing import Step
from lut_population.shapes import ModelShape

RMS_EPS = 1e-5
"""RMSNorm epsilon (``rms_norm_eps`` of the Llama-2 and Llama-3 config.json); no effect on time."""

ROPE_THETA = 10_000.0
"""Rotary base (Llama-2's ``rope_theta``); the value does not change the work done."""

SEED = 0
"""Seed of the random weights and inputs."""

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
"""LUT dtype names and their torch types."""


@dataclass
class Layer:
    """Weights of one decoder layer (matrices stored ``[in, out]``)."""

    norm_in: Tensor
    qkv: Tensor
    out: Tensor
    norm_post: Tensor
    gate_up: Tensor
    down: Tensor


@dataclass
class Weights:
    """Weights of a decoder, or of a head (one layer and ``fc``)."""

    embed: Tensor
    layers: list[Layer]
    final_norm: Tensor
    lm_head: Tensor
    fc: Tensor | None


def _matrix(rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    return torch.randn(rows, cols, device=device, dtype=dtype) / math.sqrt(rows)


def _ones(size: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    return torch.ones(size, device=device, dtype=dtype)


def _layer(shape: ModelShape, dtype: torch.dtype, device: torch.device) -> Layer:
    h = shape.hidden_size
    return Layer(
        norm_in=_ones(h, dtype, device),
        qkv=_matrix(h, shape.qkv_width, dtype, device),
        out=_matrix(shape.attention_width, h, dtype, device),
        norm_post=_ones(h, dtype, device),
        gate_up=_matrix(h, 2 * shape.intermediate_size, dtype, device),
        down=_matrix(shape.intermediate_size, h, dtype, device),
    )


def random_weights(
    shape: ModelShape, dtype: torch.dtype, device: torch.device, head: bool = False
) -> Weights:
    """Random weights of the model (``head=False``) or of its EAGLE-style head."""
    torch.manual_seed(SEED)
    h = shape.hidden_size
    embed = torch.randn(shape.vocab_size, h, device=device, dtype=dtype)
    layers = [_layer(shape, dtype, device) for _ in range(1 if head else shape.num_layers)]
    tied = shape.tied_embeddings and not head
    lm_head = embed.t() if tied else _matrix(h, shape.vocab_size, dtype, device)
    fc = _matrix(2 * h, h, dtype, device) if head else None
    return Weights(embed, layers, _ones(h, dtype, device), lm_head, fc)


def rope_tables(
    shape: ModelShape, positions: int, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor]:
    """Cosine and sine tables ``[positions, head_dim / 2]`` of the rotary embedding."""
    half = shape.head_dim // 2
    inv = ROPE_THETA ** (-torch.arange(half, device=device, dtype=torch.float32) / half)
    angles = torch.outer(torch.arange(positions, device=device, dtype=torch.float32), inv)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rms_norm(x: Tensor, weight: Tensor) -> Tensor:
    """RMSNorm, computed in fp32."""
    x32 = x.float()
    scaled = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + RMS_EPS)
    return scaled.to(x.dtype) * weight


def rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x [batch, new, heads, head_dim]`` by the tables' rows ``[new, head_dim / 2]``."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


@dataclass
class KvCache:
    """One layer's preallocated keys and values ``[batch, kv_heads, max_len, head_dim]``."""

    keys: Tensor
    values: Tensor


def new_caches(
    shape: ModelShape,
    layers: int,
    batch: int,
    max_len: int,
    dtype: torch.dtype,
    device: torch.device,
) -> list[KvCache]:
    """Zeroed KV caches of ``layers`` layers for ``batch`` sequences of ``max_len`` tokens."""
    size = (batch, shape.num_kv_heads, max_len, shape.head_dim)
    return [
        KvCache(
            torch.zeros(size, device=device, dtype=dtype),
            torch.zeros(size, device=device, dtype=dtype),
        )
        for _ in range(layers)
    ]


@contextlib.contextmanager
def _attention_backend(force_flash: bool) -> Iterator[None]:
    if not force_flash:
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        yield


@dataclass
class Decoder:
    """A decoder (or head) with its weights and rotary tables."""

    shape: ModelShape
    weights: Weights
    cos: Tensor
    sin: Tensor
    force_flash: bool

    def _attention(
        self, layer: Layer, x: Tensor, cache: KvCache, start: int, causal: bool
    ) -> Tensor:
        s = self.shape
        batch, new, _ = x.shape
        q_width = s.num_heads * s.head_dim
        kv_width = s.num_kv_heads * s.head_dim
        qkv = x @ layer.qkv
        q = qkv[..., :q_width].view(batch, new, s.num_heads, s.head_dim)
        k = qkv[..., q_width : q_width + kv_width].view(batch, new, s.num_kv_heads, s.head_dim)
        v = qkv[..., q_width + kv_width :].view(batch, new, s.num_kv_heads, s.head_dim)
        cos, sin = self.cos[start : start + new], self.sin[start : start + new]
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        end = start + new
        cache.keys[:, :, start:end] = k.transpose(1, 2)
        cache.values[:, :, start:end] = v.transpose(1, 2)
        with _attention_backend(self.force_flash):
            attended = F.scaled_dot_product_attention(
                q.transpose(1, 2),
                cache.keys[:, :, :end],
                cache.values[:, :, :end],
                is_causal=causal,
                enable_gqa=s.num_kv_heads != s.num_heads,
            )
        return attended.transpose(1, 2).reshape(batch, new, q_width) @ layer.out

    def _mlp(self, layer: Layer, x: Tensor) -> Tensor:
        gate, up = (x @ layer.gate_up).chunk(2, dim=-1)
        return (F.silu(gate) * up) @ layer.down

    def hidden_states(self, residual: Tensor, caches: list[KvCache], start: int) -> Tensor:
        """Run every layer over ``residual [batch, new, hidden]``; return the new residual."""
        causal = start == 0 and residual.shape[1] > 1
        for layer, cache in zip(self.weights.layers, caches, strict=True):
            x = rms_norm(residual, layer.norm_in)
            residual = residual + self._attention(layer, x, cache, start, causal)
            x = rms_norm(residual, layer.norm_post)
            residual = residual + self._mlp(layer, x)
        return residual

    def next_tokens(self, residual: Tensor, logit_rows: int) -> Tensor:
        """Final norm and LM head on the last ``logit_rows`` positions; greedy argmax."""
        last = rms_norm(residual[:, -logit_rows:], self.weights.final_norm)
        return torch.argmax(last @ self.weights.lm_head, dim=-1)

    def forward(self, tokens: Tensor, caches: list[KvCache], start: int, logit_rows: int) -> Tensor:
        """Tokens ``[batch, new]`` at positions ``start...``: the next token of the last rows."""
        residual = self.weights.embed[tokens]
        return self.next_tokens(self.hidden_states(residual, caches, start), logit_rows)

    def head_forward(
        self, tokens: Tensor, hidden: Tensor, caches: list[KvCache], start: int
    ) -> Tensor:
        """EAGLE-style step: ``fc(concat(embed(tokens), hidden))``, one layer, LM head, argmax."""
        fc = self.weights.fc
        if fc is None:
            raise ValueError("head_forward needs a head (weights with fc)")
        residual = torch.cat((self.weights.embed[tokens], hidden), dim=-1) @ fc
        return self.next_tokens(self.hidden_states(residual, caches, start), tokens.shape[1])


class TorchSteps:
    """A :class:`~lut_population.profile.runner.StepFactory` running the model in PyTorch.

    The target's weights are created on the first target point and the head's
    on the first head point, after the target's are freed, so each point's
    peak memory holds only the model it runs.
    """

    def __init__(self, shape: ModelShape, dtype: str, device: str, max_positions: int) -> None:
        self.shape = shape
        self.dtype = DTYPES[dtype]
        self.device = torch.device(device)
        self.max_positions = max_positions
        self._decoder: Decoder | None = None
        self._is_head = False
        self._buffers: list[object] = []

    def load(self, point: Point) -> None:
        """Create the target's or the head's weights, freeing the other's."""
        self._model(point.phase == HEAD)

    def _model(self, head: bool) -> Decoder:
        if self._decoder is None or self._is_head != head:
            self._decoder = None
            self._empty_cache()
            weights = random_weights(self.shape, self.dtype, self.device, head=head)
            cos, sin = rope_tables(self.shape, self.max_positions, self.dtype, self.device)
            flash = self.device.type == "cuda"
            self._decoder = Decoder(self.shape, weights, cos, sin, flash)
            self._is_head = head
        return self._decoder

    def build(self, point: Point) -> Step:
        """Allocate the point's KV cache and inputs; return its step."""
        decoder = self._model(point.phase == HEAD)
        s = self.shape
        max_len = point.cached_tokens + point.new_tokens
        layers = len(decoder.weights.layers)
        caches = new_caches(s, layers, point.microbatch, max_len, self.dtype, self.device)
        tokens = torch.randint(
            s.vocab_size, (point.microbatch, point.new_tokens), device=self.device
        )
        start, rows = point.cached_tokens, point.logit_rows
        self._buffers = [caches, tokens]
        if point.phase == HEAD:
            hidden = torch.randn(
                point.microbatch,
                point.new_tokens,
                s.hidden_size,
                device=self.device,
                dtype=self.dtype,
            )
            self._buffers.append(hidden)
            return lambda: decoder.head_forward(tokens, hidden, caches, start)
        return lambda: decoder.forward(tokens, caches, start, rows)

    def release(self) -> None:
        """Drop the point's caches and inputs."""
        self._buffers = []
        self._empty_cache()

    def _empty_cache(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
