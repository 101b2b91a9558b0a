"""Per-request spread of acceptance: each request drafts at its own level.

Requests differ: some are easy to draft for, some are not. A curve gives the
conditional acceptance rate ``p_i`` of each draft position (``P(A >= i) /
P(A >= i - 1)``); with a spread of concentration ``c`` a request's rate at
position ``i`` is a draw from ``Beta(p_i c, (1 - p_i) c)`` (mean ``p_i``,
variance ``p_i (1 - p_i) / (c + 1)``), and one quantile per request is shared
by all positions and rounds, so an easy request is easy everywhere.

The quantile is discretised into :data:`SPREAD_LEVELS` equal-probability
strata and each stratum is represented by the Beta's mean over it. The
levels' average rate is therefore exactly ``p_i`` at every position (the
spread keeps the curve's mean per-position rate), while each request's tokens
per verify, a convex function of its rates, is on average above the curve's
(Jensen): how much above is the convexity test in ``tests``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from simulator.acceptance.info import CurveInfo

SPREAD_LEVELS = 32
"""Equal-probability strata a request's acceptance quantile is rounded into."""


def level_of(quantile: float) -> int:
    """Return the stratum (``0 .. SPREAD_LEVELS - 1``) of a quantile in [0, 1)."""
    return min(int(quantile * SPREAD_LEVELS), SPREAD_LEVELS - 1)


@lru_cache(maxsize=1 << 16)
def stratum_mean(rate: float, concentration: float, level: int) -> float:
    """Return the mean of ``Beta(rate c, (1 - rate) c)`` over quantile stratum ``level``.

    Rates of exactly 0 or 1 have no spread and are returned unchanged.

    Args:
        rate: The curve's conditional rate ``p`` in [0, 1].
        concentration: ``c > 0``.
        level: The stratum, ``0 .. SPREAD_LEVELS - 1``.
    """
    if rate <= 0.0 or rate >= 1.0:
        return rate
    if 2 * level >= SPREAD_LEVELS:
        # The upper strata through 1 - X ~ Beta((1 - p) c, p c): quantiles near 1 lose
        # their digits in floating point, those of the mirrored variable near 0 do not.
        return 1.0 - _lower_stratum_mean(1.0 - rate, concentration, SPREAD_LEVELS - 1 - level)
    return _lower_stratum_mean(rate, concentration, level)


def _lower_stratum_mean(rate: float, concentration: float, level: int) -> float:
    """The Beta's mean over stratum ``level`` computed from its quantiles directly."""
    from scipy import special  # about 0.1 s to import: only when used

    a = rate * concentration
    b = (1.0 - rate) * concentration
    low = 0.0 if level == 0 else float(special.betaincinv(a, b, level / SPREAD_LEVELS))
    high = (
        1.0
        if level == SPREAD_LEVELS - 1
        else float(special.betaincinv(a, b, (level + 1) / SPREAD_LEVELS))
    )
    # E[X; low < X < high] = mean * (I_high(a + 1, b) - I_low(a + 1, b)).
    share = float(special.betainc(a + 1.0, b, high)) - float(special.betainc(a + 1.0, b, low))
    value = rate * share * SPREAD_LEVELS
    return min(max(value, 0.0), 1.0)


def spread_survival(
    survival: Sequence[float], concentration: float, level: int
) -> tuple[float, ...]:
    """Return a survival curve ``P(A >= 1..k)`` at one request level.

    Converts the curve to conditional rates, moves each to its stratum mean
    and multiplies back.

    Args:
        survival: The curve's ``P(A >= i)``, non-increasing.
        concentration: The spread's Beta concentration.
        level: The request's stratum.
    """
    result: list[float] = []
    previous = 1.0
    running = 1.0
    for value in survival:
        rate = value / previous if previous > 0.0 else 0.0
        previous = value
        running *= stratum_mean(min(rate, 1.0), concentration, level)
        result.append(running)
    return tuple(result)


def concentration_for(choice: str | float, info: CurveInfo) -> float | None:
    """The Beta concentration a request drawing from a curve gets (None: no spread).

    Args:
        choice: ``speculation.request_spread``: ``none``, ``from_curve`` (the
            curve's fitted one; the scenario refuses curves without one) or a
            concentration.
        info: The curve's description.
    """
    if choice == "none":
        return None
    if choice == "from_curve":
        fitted = info.request_spread
        if fitted is None:
            raise ValueError(f"acceptance curve {info.name!r} has no fitted request_spread")
        return fitted.concentration
    return float(choice)
