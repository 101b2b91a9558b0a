"""Which client device class each request comes from.

A trace row may name its origin (the generic formats' ``origin`` column);
every other request gets one by the workload's origin rule:

* ``by_count``: drawn at random, each client class with probability
  proportional to its ``count`` (its number of devices);
* ``weights``: drawn at random with the configured weights;
* ``round_robin``: the client classes in turn, in the order given, starting
  with the first, over the requests that need an origin (in arrival order).

Random draws use only the generator passed in (the ``origins`` stream). With
no client classes (and no weights) requests keep the empty origin "".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.workload.arrays import StrArray, text_array

ORIGIN_RULES: tuple[str, ...] = ("by_count", "weights", "round_robin")
"""The values of ``workload.origin.rule``."""


@dataclass(frozen=True)
class OriginRule:
    """How requests without an origin get one.

    Attributes:
        rule: One of :data:`ORIGIN_RULES`.
        weights: ``(device class id, weight > 0)`` pairs, for rule ``weights``.
    """

    rule: str = "by_count"
    weights: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.rule not in ORIGIN_RULES:
            raise ValueError(f"unknown origin rule {self.rule!r}; known: {ORIGIN_RULES}")
        if any(not w > 0 for _, w in self.weights):
            raise ValueError("origin weights must be > 0")
        if self.rule == "weights" and not self.weights:
            raise ValueError("origin rule 'weights' needs at least one weight")


def assign_origins(
    given: StrArray,
    rule: OriginRule,
    client_classes: Sequence[tuple[str, int]],
    rng: np.random.Generator,
) -> StrArray:
    """Fill in the empty entries of ``given`` by ``rule``.

    Args:
        given: One origin per request in arrival order; "" where none is known.
        rule: The origin rule.
        client_classes: ``(device class id, count)`` of the scenario's client
            classes, in declaration order.
        rng: The ``origins`` random stream.

    Raises:
        ValueError: Rule ``by_count`` with client classes whose counts are all 0.
    """
    missing = np.flatnonzero(given == "")
    if len(missing) == 0:
        return given
    if rule.rule == "weights":
        names = [name for name, _ in rule.weights]
        weights = np.array([w for _, w in rule.weights], dtype=float)
    else:
        names = [name for name, _ in client_classes]
        weights = np.array([count for _, count in client_classes], dtype=float)
    if not names:
        return given
    if rule.rule == "round_robin":
        picks = np.arange(len(missing)) % len(names)
    else:
        total = float(weights.sum())
        if not total > 0:
            raise ValueError("client class counts must not all be 0")
        picks = rng.choice(len(names), size=len(missing), p=weights / total)
    chosen = np.asarray(names, dtype=np.str_)[picks]
    width = max(given.dtype.itemsize // 4, chosen.dtype.itemsize // 4, 1)
    out = given.astype(f"<U{width}")
    out[missing] = chosen
    return text_array(out)
