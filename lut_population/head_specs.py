"""The structure of one draft head (EAGLE, EAGLE-3, Medusa, MTP), as cited in ``inputs/heads.yaml``.

A head drafter runs on its target's GPUs, reads the target's hidden states and
has the target's hidden size, heads, KV heads and MLP width; the fields here
say only what the head adds on top of those shapes (see
:mod:`lut_population.heads` for how a step is priced).
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_KINDS = ("eagle", "eagle3", "medusa", "mtp")
"""Kinds of draft head."""


@dataclass(frozen=True)
class HeadSpec:
    """One released draft head.

    Attributes:
        model_id: The head's model id in LUT files (``<target>.<kind>``).
        kind: ``eagle``, ``eagle3``, ``medusa`` or ``mtp``.
        target: Model id of the target whose shapes and operator times it uses.
        name: The released checkpoint.
        decoder_layers: Decoder layers per depth (EAGLE, EAGLE-3, MTP: 1; Medusa: 0).
        depth: Sequential modules per step (MTP depth; 1 otherwise).
        fc_inputs: Hidden-size vectors the input projection takes (fc ``fc_inputs x h -> h``); 0: none.
        fc_each_step: Whether every step runs the fc (EAGLE, MTP) or only the first step of a
            round, which reads the target's features (EAGLE-3).
        qkv_inputs: Input width of the QKV projection in hidden sizes (EAGLE-3: 2).
        lm_heads: LM heads evaluated per step (Medusa: one per head).
        residual_blocks: Residual blocks (linear h -> h, SiLU, add) per LM head (Medusa).
        lm_head_vocab: Output width of each LM head.
        own_lm_head: Whether the LM head weights belong to the head (not the target's).
        source: Citations.
    """

    model_id: str
    kind: str
    target: str
    name: str
    decoder_layers: int
    depth: int
    fc_inputs: int
    fc_each_step: bool
    qkv_inputs: int
    lm_heads: int
    residual_blocks: int
    lm_head_vocab: int
    own_lm_head: bool
    source: str
