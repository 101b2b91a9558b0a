"""Trilinear interpolation on one LUT grid, with plain-float arithmetic.

A :class:`KeyGrid` holds the values of one LUT key on its grid of
context_len x microbatch x fanout_k. A lookup finds, per axis, the two grid
values around the asked value with :func:`bisect.bisect_right` and blends the
(up to) eight corner points linearly. Exact grid points return the stored
numbers unchanged. Everything runs on Python lists and floats: one lookup is
far cheaper that way than through numpy, whose per-call overhead dominates for
single values.

Out-of-range rules (:data:`OutOfRange`):

* ``raise``: a value outside an axis's range is an :class:`InputError`;
* ``clamp``: the nearest edge of the axis is used;
* ``extrapolate``: the line through the two edge points of the axis is
  continued; the results are floored at 0. An axis with a single grid value
  has no line to continue and is held constant (as with ``clamp``).

On every axis a single grid value requires an exact match under ``raise``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Literal

from simulator.errors import InputError, make_issue

OutOfRange = Literal["raise", "clamp", "extrapolate"]
"""What a lookup outside the grid does."""

OUT_OF_RANGE_MODES: tuple[OutOfRange, ...] = ("raise", "clamp", "extrapolate")
"""Every :data:`OutOfRange` choice."""

Values = tuple[float, float, float, float]
"""Looked-up numbers: latency_ms, energy_mj, peak_mem_mb, kv_delta_mb."""

Bracket = tuple[int, int, float]
"""Lower index, upper index and weight of the upper one, on one axis."""


def bracket(axis: Sequence[float], value: float, out_of_range: OutOfRange) -> Bracket | None:
    """Locate ``value`` on a sorted ``axis``.

    Args:
        axis: Grid values, sorted ascending, without repeats.
        value: The asked value.
        out_of_range: What to do when ``value`` is outside the axis.

    Returns:
        ``(i0, i1, w)`` such that the value is ``axis[i0] + w * (axis[i1] -
        axis[i0])`` (``w`` = 0 and ``i0 == i1`` on a grid point; ``w`` outside
        [0, 1] when extrapolating), or ``None`` when the value is outside the
        axis and ``out_of_range`` is ``raise``, or the value is NaN.
    """
    last = len(axis) - 1
    low = axis[0]
    high = axis[last]
    if low <= value <= high:
        index = bisect_right(axis, value) - 1
        start = axis[index]
        if index == last or value == start:
            return index, index, 0.0
        return index, index + 1, (value - start) / (axis[index + 1] - start)
    if out_of_range == "raise" or value != value:
        return None
    if out_of_range == "clamp" or last == 0:
        edge = 0 if value < low else last
        return edge, edge, 0.0
    if value < low:
        return 0, 1, (value - low) / (axis[1] - low)
    start = axis[last - 1]
    return last - 1, last, (value - start) / (high - start)


class KeyGrid:
    """The values of one LUT key on its context_len x microbatch x fanout_k grid.

    Args:
        file: The LUT file, for messages.
        label: The key, rendered for messages.
        context_len: Sorted context_len grid values.
        microbatch: Sorted microbatch grid values.
        fanout_k: Sorted fanout_k grid values.
        values: One :data:`Values` tuple per grid point, in row-major order
            (context_len slowest, fanout_k fastest).
    """

    __slots__ = ("_nk", "_nm", "_values", "context_len", "fanout_k", "file", "label", "microbatch")

    def __init__(
        self,
        file: str,
        label: str,
        context_len: Sequence[int],
        microbatch: Sequence[int],
        fanout_k: Sequence[int],
        values: Sequence[Values],
    ) -> None:
        size = len(context_len) * len(microbatch) * len(fanout_k)
        if size == 0 or len(values) != size:
            raise ValueError(f"grid of {size} points given {len(values)} values")
        self.file = file
        self.label = label
        self.context_len = tuple(int(v) for v in context_len)
        self.microbatch = tuple(int(v) for v in microbatch)
        self.fanout_k = tuple(int(v) for v in fanout_k)
        self._nm = len(self.microbatch)
        self._nk = len(self.fanout_k)
        self._values = list(values)

    def has_energy(self) -> bool:
        """Return whether any grid point has a positive ``energy_mj``.

        The LUT schema requires ``energy_mj`` (a number >= 0, never empty or
        NaN), so a file without an energy model writes 0 in every row; such a
        key has no energy data.
        """
        return any(point[1] > 0.0 for point in self._values)

    def _outside(self, axis_name: str, axis: Sequence[int], value: float) -> InputError:
        if len(axis) == 1:
            allowed = f"exactly {axis[0]} (the only {axis_name} in the grid of this key)"
        else:
            allowed = f"{axis[0]} to {axis[-1]} (the {axis_name} range of the grid of this key)"
        allowed += "; or set the out-of-range rule to 'clamp' or 'extrapolate'"
        return InputError(
            [
                make_issue(
                    self.file,
                    f"lookup of {self.label}, axis {axis_name}",
                    value,
                    allowed,
                    f"{axis_name} outside the LUT grid",
                )
            ]
        )

    def evaluate(
        self, context_len: float, microbatch: float, fanout_k: float, out_of_range: OutOfRange
    ) -> Values:
        """Interpolate the grid at one point.

        Raises:
            InputError: A value is outside its axis and ``out_of_range`` is
                ``raise`` (or the value is NaN).
            ValueError: ``out_of_range`` is not one of :data:`OUT_OF_RANGE_MODES`.
        """
        if out_of_range not in OUT_OF_RANGE_MODES:
            raise ValueError(
                f"out_of_range must be one of {', '.join(OUT_OF_RANGE_MODES)}, got {out_of_range!r}"
            )
        on_c = bracket(self.context_len, context_len, out_of_range)
        if on_c is None:
            raise self._outside("context_len", self.context_len, context_len)
        on_m = bracket(self.microbatch, microbatch, out_of_range)
        if on_m is None:
            raise self._outside("microbatch", self.microbatch, microbatch)
        on_k = bracket(self.fanout_k, fanout_k, out_of_range)
        if on_k is None:
            raise self._outside("fanout_k", self.fanout_k, fanout_k)
        nm = self._nm
        nk = self._nk
        table = self._values
        c0, c1, wc = on_c
        m0, m1, wm = on_m
        k0, k1, wk = on_k
        if wc == 0.0 and wm == 0.0 and wk == 0.0:
            return table[(c0 * nm + m0) * nk + k0]
        cs = ((c0, 1.0),) if wc == 0.0 else ((c0, 1.0 - wc), (c1, wc))
        ms = ((m0, 1.0),) if wm == 0.0 else ((m0, 1.0 - wm), (m1, wm))
        ks = ((k0, 1.0),) if wk == 0.0 else ((k0, 1.0 - wk), (k1, wk))
        latency = energy = peak = kv = 0.0
        for ic, weight_c in cs:
            for im, weight_m in ms:
                base = (ic * nm + im) * nk
                weight_cm = weight_c * weight_m
                for ik, weight_k in ks:
                    weight = weight_cm * weight_k
                    point = table[base + ik]
                    latency += weight * point[0]
                    energy += weight * point[1]
                    peak += weight * point[2]
                    kv += weight * point[3]
        return (
            latency if latency > 0.0 else 0.0,
            energy if energy > 0.0 else 0.0,
            peak if peak > 0.0 else 0.0,
            kv if kv > 0.0 else 0.0,
        )
