"""``per_k``: a table of accepted fractions by draft length (the specification's form).

A bin maps draft lengths to values, ``acceptance: {k=1: 0.92, k=2: 0.85, k=4: 0.72}``
(keys ``k=4`` and plain ``4`` are both accepted). Semantics:

* The value ``v`` at ``k`` is the expected *fraction* of the ``k`` drafted
  tokens that are accepted, so ``E[A] = k * v`` there.
* Between two table entries ``E[A]`` is interpolated linearly in ``k`` (this
  keeps ``E[A]`` non-decreasing in ``k``, which the table must be).
* The distribution of ``A`` at a given ``k`` is the prefix (``iid``) form
  with the per-token probability ``alpha_k`` that reproduces that mean,
  ``sum_{i=1..k} alpha_k**i = E[A]``, solved by bisection to full float
  precision and cached.
* Below the smallest tabulated ``k`` the ``alpha`` solved at that smallest
  ``k`` is used; above the largest, the ``alpha`` solved at the largest. So
  ``E[A]`` keeps growing past the table, but more slowly, as it does for a
  real drafter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

from simulator.acceptance.binned import BinnedModel
from simulator.acceptance.grid import bin_order_issues, is_number
from simulator.acceptance.iid import geometric_survival
from simulator.acceptance.info import curve_info
from simulator.errors import Issue, make_issue, raise_if_any

_K_KEY = re.compile(r"^(?:k=)?([1-9][0-9]*)$")


def parse_k_key(key: str) -> int | None:
    """Return the draft length a table key names (``"k=4"`` or ``"4"``), or None."""
    match = _K_KEY.match(key)
    return int(match.group(1)) if match else None


def prefix_sum(alpha: float, k: int) -> float:
    """Return ``alpha + alpha**2 + ... + alpha**k`` (Horner form, exact at alpha = 1)."""
    total = 0.0
    for _ in range(k):
        total = alpha * (1.0 + total)
    return total


def solve_alpha(mean_accepted: float, k: int) -> float:
    """Return the per-token probability whose truncated-geometric mean over ``k`` is given.

    Solves ``sum_{i=1..k} alpha**i = mean_accepted`` for ``alpha`` in [0, 1].

    Args:
        mean_accepted: Target E[A], clipped to ``[0, k]``.
        k: Draft length, ``>= 1``.
    """
    if k < 1:
        raise ValueError(f"draft length k must be >= 1, got {k}")
    if mean_accepted <= 0.0:
        return 0.0
    if mean_accepted >= k:
        return 1.0
    # prefix_sum rises strictly with alpha on [0, 1]: bisect until the bracket
    # cannot shrink in floating point (at most ~1,100 halvings, ~60 in practice).
    low, high = 0.0, 1.0
    while True:
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if prefix_sum(middle, k) < mean_accepted:
            low = middle
        else:
            high = middle
    below, above = mean_accepted - prefix_sum(low, k), prefix_sum(high, k) - mean_accepted
    return low if below <= above else high


@dataclass(frozen=True)
class PerKBin:
    """One bin of a ``per_k`` curve.

    Attributes:
        context_len: Context length the bin applies at (tokens).
        temperature: Sampling temperature the bin applies at.
        table: ``(k, accepted fraction)`` pairs, ascending in ``k``.
    """

    context_len: int
    temperature: float
    table: tuple[tuple[int, float], ...]

    def mean_accepted_at(self, k: int) -> float:
        """Return E[A] at a draft length inside the table's range (linear in k)."""
        entries = self.table
        for (k_low, v_low), (k_high, v_high) in pairwise(entries):
            if k_low <= k <= k_high:
                mean_low, mean_high = k_low * v_low, k_high * v_high
                return mean_low + (mean_high - mean_low) * (k - k_low) / (k_high - k_low)
        k_only, v_only = entries[0]
        if k == k_only:
            return k_only * v_only
        raise ValueError(f"k={k} is outside the table range {entries[0][0]}..{entries[-1][0]}")


class PerKModel(BinnedModel[PerKBin]):
    """Accepted fraction tabulated by draft length (see the module docstring)."""

    kind: ClassVar[str] = "per_k"

    def alpha_for(self, index: int, k: int) -> float:
        """Return the per-token probability bin ``index`` uses at draft length ``k >= 1``."""
        table = self.bins[index].table
        k_min, k_max = table[0][0], table[-1][0]
        anchor = min(max(k, k_min), k_max)
        return solve_alpha(self.bins[index].mean_accepted_at(anchor), anchor)

    def bin_survival(self, index: int, k: int) -> tuple[float, ...]:
        """Return ``(alpha_k, ..., alpha_k**k)`` for bin ``index``."""
        if k == 0:
            return ()
        return geometric_survival(self.alpha_for(index, k), k)


def _table_issues(acceptance: Mapping[Any, Any], where: str, file: Path) -> list[Issue]:
    issues: list[Issue] = []
    by_k: dict[int, tuple[str, float]] = {}
    for key, value in acceptance.items():
        k = parse_k_key(str(key))
        if k is None or not is_number(value):  # reported by the schema
            continue
        if k in by_k:
            issues.append(
                make_issue(
                    file,
                    f"{where}.acceptance.{key}",
                    key,
                    "each draft length once",
                    f"same k as key {by_k[k][0]!r}",
                )
            )
            continue
        by_k[k] = (str(key), float(value))
    table = sorted((k, value) for k, (_, value) in by_k.items())
    for (k_low, v_low), (k_high, v_high) in pairwise(table):
        # A drop within floating-point rounding (values written as ratios) is no decrease.
        if k_high * v_high < k_low * v_low * (1.0 - 1e-12):
            issues.append(
                make_issue(
                    file,
                    f"{where}.acceptance.{by_k[k_high][0]}",
                    v_high,
                    f">= {k_low * v_low / k_high:.6g}, so that E[A] = k * value is at least "
                    f"{k_low * v_low:.6g}, its value at k={k_low}",
                    "expected accepted tokens decrease as k grows",
                )
            )
    return issues


def check_per_k(document: Mapping[str, Any], file: Path) -> list[Issue]:
    """Return the cross-field problems of a (possibly schema-invalid) ``per_k`` document.

    Checks that no draft length appears twice in a bin (``k=2`` and ``2``), that
    E[A] = k * value does not decrease with k, and the bin order.
    """
    issues: list[Issue] = []
    bins = document.get("bins")
    if isinstance(bins, list):
        for index, raw in enumerate(bins):
            acceptance = raw.get("acceptance") if isinstance(raw, Mapping) else None
            if isinstance(acceptance, Mapping):
                issues.extend(_table_issues(acceptance, f"bins[{index}]", file))
    issues.extend(bin_order_issues(bins, file))
    return issues


def build_per_k(document: Mapping[str, Any], file: Path) -> PerKModel:
    """Build a :class:`PerKModel` from a schema-valid document with defaults filled in.

    Raises:
        InputError: A draft length given twice, E[A] decreasing in k, or bins out
            of order or duplicated.
    """
    raise_if_any(check_per_k(document, file))
    bins = [
        PerKBin(
            int(raw["context_len"]),
            float(raw["temperature"]),
            tuple(
                sorted(
                    (k, float(value))
                    for key, value in raw["acceptance"].items()
                    if (k := parse_k_key(str(key))) is not None
                )
            ),
        )
        for raw in document["bins"]
    ]
    return PerKModel(curve_info(document, file), bins)
