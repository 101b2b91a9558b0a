"""How a replica's step times depart from the LUT's uniform-batch price (``simulation.*``).

Two settings, with constants derived from the H100 serving-loop measurements
(``python -m lut_population.serving_loop`` writes them to
``simulator/data/step_timing.json``; what they were fitted to is recorded
there and in ``docs/step_timing.md``):

* ``simulation.ragged_batches``: the context a decode-lane batch of sequences
  with different contexts is priced at (:mod:`simulator.engine.ragged`).
* ``simulation.step_noise``: a multiplicative random factor on each
  iteration's latency (:mod:`simulator.engine.step_noise`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from policies.lanes import DECODE, FUSED, VERIFY

DATA_PACKAGE = "simulator.data"
DATA_FILE = "step_timing.json"

RAGGED_RULES = ("mean", "tail_weighted")
"""``simulation.ragged_batches`` values: price at the mean context, or the measured rule."""
NOISE_CHOICES = ("none", "measured")
"""``simulation.step_noise`` values."""
DEFAULT_RAGGED = "tail_weighted"
"""``simulation.ragged_batches``'s default (kept equal to the schema's; a test checks it)."""
DEFAULT_NOISE = "none"
"""``simulation.step_noise``'s default (kept equal to the schema's; a test checks it)."""
NOISE_KINDS = ("decode", "round", "prefill")
"""Kinds of step with their own dispersion: plain decode, speculative round, prefill."""

Sigmas = tuple[tuple[str, float], ...]
"""Lognormal dispersion by kind of step, as ``(kind, sigma)`` pairs."""


@dataclass(frozen=True)
class MeasuredTiming:
    """The derived constants (see ``simulator/data/step_timing.json``).

    Attributes:
        decode_weight: ``w`` of the ragged rule ``mean + w * (max - mean)``
            for plain decode steps.
        round_weight: The same for speculative rounds (verify, fused).
        sigma: Lognormal dispersion of a step's latency by kind of step.
    """

    decode_weight: float
    round_weight: float
    sigma: Sigmas


@cache
def measured() -> MeasuredTiming:
    """Read the shipped constants once."""
    text = resources.files(DATA_PACKAGE).joinpath(DATA_FILE).read_text(encoding="utf-8")
    raw: dict[str, Any] = json.loads(text)
    sigma = raw["step_noise"]["sigma"]
    return MeasuredTiming(
        decode_weight=float(raw["ragged"]["tail_weight"]["decode"]),
        round_weight=float(raw["ragged"]["tail_weight"]["round"]),
        sigma=tuple((kind, float(sigma[kind])) for kind in NOISE_KINDS),
    )


@dataclass(frozen=True)
class StepTiming:
    """A run's step-timing settings, resolved from the scenario.

    Attributes:
        decode_weight: Weight of the longest context in a plain decode
            batch's priced context (0: the mean, as the LUT is indexed).
        round_weight: The same for verify and fused rounds.
        noise_sigma: Dispersion by kind of step (``None``: no noise).
    """

    decode_weight: float = 0.0
    round_weight: float = 0.0
    noise_sigma: Sigmas | None = None

    @classmethod
    def default(cls) -> StepTiming:
        """The scenario keys' defaults (:data:`DEFAULT_RAGGED`, :data:`DEFAULT_NOISE`)."""
        return cls.of(DEFAULT_RAGGED, DEFAULT_NOISE)

    @classmethod
    def of(cls, ragged_batches: str, step_noise: str) -> StepTiming:
        """Resolve the two scenario keys (values as in :data:`RAGGED_RULES`, :data:`NOISE_CHOICES`)."""
        constants = measured()
        sigma = constants.sigma if step_noise == "measured" else None
        if ragged_batches == "tail_weighted":
            return cls(constants.decode_weight, constants.round_weight, sigma)
        return cls(0.0, 0.0, sigma)

    def tail_weights(self) -> dict[str, float]:
        """The ragged rule's weight by decode-lane kind of work (plain decode, verify, fused)."""
        return {
            DECODE: self.decode_weight,
            VERIFY: self.round_weight,
            FUSED: self.round_weight,
        }
