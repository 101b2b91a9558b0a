"""``positional``: a conditional acceptance rate for each draft position.

A bin lists ``p_1..p_n``: ``p_i`` is the probability that draft token ``i``
is accepted given that tokens ``1..i-1`` were. ``A`` is the length of the
accepted prefix, so ``P(A >= i) = p_1 * ... * p_i`` and
``E[A] = sum_{i<=k} prod_{j<=i} p_j``. Positions beyond ``n`` use ``p_n``.
The rates need not be monotone (prompt-lookup drafts, for example, become
*more* likely to be accepted once their first tokens matched).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from simulator.acceptance.binned import BinnedModel
from simulator.acceptance.grid import bin_order_issues
from simulator.acceptance.info import curve_info
from simulator.errors import Issue, raise_if_any


def positional_survival(rates: tuple[float, ...], k: int) -> tuple[float, ...]:
    """Return ``P(A >= i)`` for ``i = 1..k`` from conditional rates, the last one repeated.

    Args:
        rates: Conditional acceptance rates ``p_1..p_n`` (``n >= 1``).
        k: Draft length, ``>= 0``.
    """
    curve: list[float] = []
    value = 1.0
    last = len(rates) - 1
    for position in range(k):
        value *= rates[min(position, last)]
        curve.append(value)
    return tuple(curve)


def unconditional_to_conditional(accepted_fraction: tuple[float, ...]) -> tuple[float, ...]:
    """Convert per-position fractions ``P(A >= i)`` into conditional rates ``p_i``.

    Serving engines often report, per draft position, the share of rounds in
    which that position was accepted; under prefix acceptance that share is
    ``P(A >= i)`` and ``p_i = P(A >= i) / P(A >= i - 1)``. A position after one
    with share 0 gets rate 0.

    Args:
        accepted_fraction: Non-increasing shares ``P(A >= 1), P(A >= 2), ...``.
    """
    rates: list[float] = []
    previous = 1.0
    for share in accepted_fraction:
        rates.append(share / previous if previous > 0.0 else 0.0)
        previous = share
    return tuple(rates)


@dataclass(frozen=True)
class PositionalBin:
    """One bin of a ``positional`` curve.

    Attributes:
        context_len: Context length the bin applies at (tokens).
        temperature: Sampling temperature the bin applies at.
        rates: Conditional acceptance rates ``p_1..p_n``.
    """

    context_len: int
    temperature: float
    rates: tuple[float, ...]


class PositionalModel(BinnedModel[PositionalBin]):
    """Per-position conditional acceptance rates (see the module docstring)."""

    kind: ClassVar[str] = "positional"

    def bin_survival(self, index: int, k: int) -> tuple[float, ...]:
        """Return the cumulative products of bin ``index``'s rates up to position ``k``."""
        return positional_survival(self.bins[index].rates, k)


def check_positional(document: Mapping[str, Any], file: Path) -> list[Issue]:
    """Return the cross-field problems of a (possibly schema-invalid) document: bin order."""
    return bin_order_issues(document.get("bins"), file)


def build_positional(document: Mapping[str, Any], file: Path) -> PositionalModel:
    """Build a :class:`PositionalModel` from a schema-valid document with defaults filled in.

    Raises:
        InputError: Bins are out of order or duplicated.
    """
    bins = [
        PositionalBin(
            int(raw["context_len"]),
            float(raw["temperature"]),
            tuple(float(rate) for rate in raw["rates"]),
        )
        for raw in document["bins"]
    ]
    raise_if_any(check_positional(document, file))
    return PositionalModel(curve_info(document, file), bins)
