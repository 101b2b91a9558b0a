"""Bins keyed by (temperature, context_len) and linear interpolation weights over them.

Bins are grouped by temperature; inside a group they are ordered by context
length. A query ``(context_len, temperature)`` is answered by mixing at most
four bins: the two temperature groups around ``temperature`` and, in each,
the two bins around ``context_len``, with linear weights. Outside the range
covered by the bins the nearest bin is used (clamping).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from simulator.errors import Issue, make_issue


def linear_weights(points: Sequence[float], x: float) -> tuple[tuple[int, float], ...]:
    """Return ``(index, weight)`` pairs interpolating ``x`` linearly between sorted ``points``.

    Outside ``[points[0], points[-1]]`` the nearest end point gets weight 1.
    Zero weights are left out, so a hit on a point returns one pair.

    Args:
        points: Strictly increasing positions.
        x: The query position.
    """
    last = len(points) - 1
    if x <= points[0]:
        return ((0, 1.0),)
    if x >= points[last]:
        return ((last, 1.0),)
    upper = bisect_right(points, x)
    lower = upper - 1
    low_point = points[lower]
    if x == low_point:
        return ((lower, 1.0),)
    weight = (x - low_point) / (points[upper] - low_point)
    return ((lower, 1.0 - weight), (upper, weight))


@dataclass(frozen=True)
class BinGrid:
    """The (temperature, context_len) positions of a curve's bins.

    Attributes:
        temperatures: Distinct bin temperatures, ascending.
        contexts: For each temperature, its bins' context lengths, ascending.
        starts: For each temperature, the index of its first bin in the curve.
    """

    temperatures: tuple[float, ...]
    contexts: tuple[tuple[int, ...], ...]
    starts: tuple[int, ...]

    @classmethod
    def from_keys(cls, keys: Sequence[tuple[float, int]]) -> BinGrid:
        """Build the grid from bin keys already sorted without duplicates.

        Args:
            keys: ``(temperature, context_len)`` of every bin, in file order.
        """
        temperatures: list[float] = []
        contexts: list[list[int]] = []
        starts: list[int] = []
        for index, (temperature, context_len) in enumerate(keys):
            if not temperatures or temperature != temperatures[-1]:
                temperatures.append(temperature)
                contexts.append([])
                starts.append(index)
            contexts[-1].append(context_len)
        return cls(tuple(temperatures), tuple(tuple(c) for c in contexts), tuple(starts))

    @property
    def context_span(self) -> tuple[int, int]:
        """The contexts ``(lo, hi)`` beyond which a query's weights no longer change.

        Every context at or below ``lo`` gets the weights of ``lo``, and every one at or
        above ``hi`` those of ``hi``: each temperature's first and last bins hold beyond them.
        """
        return min(c[0] for c in self.contexts), max(c[-1] for c in self.contexts)

    def weights(self, context_len: float, temperature: float) -> tuple[tuple[int, float], ...]:
        """Return ``(bin index, weight)`` pairs whose weights sum to 1 for a query."""
        pairs: list[tuple[int, float]] = []
        for group, group_weight in linear_weights(self.temperatures, temperature):
            start = self.starts[group]
            for offset, weight in linear_weights(self.contexts[group], context_len):
                pairs.append((start + offset, group_weight * weight))
        return tuple(pairs)


def is_number(value: object) -> bool:
    """Return True for a finite int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def raw_bin_keys(bins: object) -> list[tuple[int, tuple[float, int]]]:
    """Return ``(index, (temperature, context_len))`` for every well-formed bin of a raw document.

    Missing keys take their defaults (temperature 0, context_len 0); bins with a
    malformed temperature or context length are skipped (the schema reports them).

    Args:
        bins: The document's ``bins`` value, possibly invalid.
    """
    keyed: list[tuple[int, tuple[float, int]]] = []
    if not isinstance(bins, list):
        return keyed
    for index, raw in enumerate(bins):
        if not isinstance(raw, Mapping):
            continue
        temperature = raw.get("temperature", 0.0)
        context_len = raw.get("context_len", 0)
        if is_number(temperature) and is_number(context_len) and int(context_len) == context_len:
            keyed.append((index, (float(temperature), int(context_len))))
    return keyed


def bin_order_issues(bins: object, file: Path) -> list[Issue]:
    """Report bins that are out of (temperature, context_len) order or duplicated.

    Tolerates an otherwise invalid document: malformed bins are skipped.

    Args:
        bins: The document's ``bins`` value.
        file: The curve file, for messages.
    """
    keyed = raw_bin_keys(bins)
    issues: list[Issue] = []
    for (previous_index, previous), (index, current) in pairwise(keyed):
        if current == previous:
            issues.append(
                make_issue(
                    file,
                    f"bins[{index}]",
                    {"temperature": current[0], "context_len": current[1]},
                    "one bin per (temperature, context_len)",
                    f"duplicate of bins[{previous_index}]",
                )
            )
        elif current < previous:
            field = "temperature" if current[0] < previous[0] else "context_len"
            value = current[0] if field == "temperature" else current[1]
            issues.append(
                make_issue(
                    file,
                    f"bins[{index}].{field}",
                    value,
                    f"bins sorted by temperature, then context_len (bins[{previous_index}] has "
                    f"temperature {previous[0]}, context_len {previous[1]})",
                    "bins out of order",
                )
            )
    return issues
