"""``iid``: every drafted token is accepted independently with probability alpha.

This is the model of Leviathan et al. (2023): tokens are checked in order and
the round stops at the first rejection, so ``P(A >= i) = alpha**i`` and the
number of accepted draft tokens ``A`` is a geometric variable truncated at
``k``. Closed forms::

    E[A]     = alpha * (1 - alpha**k) / (1 - alpha)
    E[A + 1] = (1 - alpha**(k + 1)) / (1 - alpha)

(``k`` and ``k + 1`` when ``alpha == 1``).
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


def iid_expected_accepted(alpha: float, k: int) -> float:
    """Return E[A] for per-token acceptance ``alpha`` and draft length ``k``.

    Args:
        alpha: Per-token acceptance probability in [0, 1].
        k: Draft length, ``>= 0``.
    """
    if alpha == 1.0:
        return float(k)
    return alpha * (1.0 - alpha**k) / (1.0 - alpha)


def iid_expected_tokens(alpha: float, k: int) -> float:
    """Return E[A + 1] = (1 - alpha^(k+1)) / (1 - alpha), tokens per verify round."""
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def geometric_survival(alpha: float, k: int) -> tuple[float, ...]:
    """Return ``(alpha, alpha**2, ..., alpha**k)``, the survival curve of the iid model."""
    curve: list[float] = []
    value = 1.0
    for _ in range(k):
        value *= alpha
        curve.append(value)
    return tuple(curve)


@dataclass(frozen=True)
class IidBin:
    """One bin of an ``iid`` curve.

    Attributes:
        context_len: Context length the bin applies at (tokens).
        temperature: Sampling temperature the bin applies at.
        alpha: Per-token acceptance probability.
    """

    context_len: int
    temperature: float
    alpha: float


class IidModel(BinnedModel[IidBin]):
    """Independent per-token acceptance with probability alpha (see the module docstring)."""

    kind: ClassVar[str] = "iid"

    def bin_survival(self, index: int, k: int) -> tuple[float, ...]:
        """Return ``(alpha, ..., alpha**k)`` for bin ``index``."""
        return geometric_survival(self.bins[index].alpha, k)


def check_iid(document: Mapping[str, Any], file: Path) -> list[Issue]:
    """Return the cross-field problems of a (possibly schema-invalid) document: bin order."""
    return bin_order_issues(document.get("bins"), file)


def build_iid(document: Mapping[str, Any], file: Path) -> IidModel:
    """Build an :class:`IidModel` from a schema-valid document with defaults filled in.

    Raises:
        InputError: Bins are out of order or duplicated.
    """
    bins = [
        IidBin(int(raw["context_len"]), float(raw["temperature"]), float(raw["alpha"]))
        for raw in document["bins"]
    ]
    raise_if_any(check_iid(document, file))
    return IidModel(curve_info(document, file), bins)
