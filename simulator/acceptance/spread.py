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

    The stratum's share of the mean is the difference of the partial
    expectations at its two quantiles (:func:`_partial_mean`), each taken
    from the tail in which it keeps its digits, so the levels' average is the
    rate to about ten digits for any rate and concentration the scenario
    allows, even where the Beta's quantiles lie closer to 0 or 1 than a
    double can tell apart (a small concentration with a rate near 0 or 1).

    Args:
        rate: The curve's conditional rate ``p`` in [0, 1].
        concentration: ``c > 0``.
        level: The stratum, ``0 .. SPREAD_LEVELS - 1``.
    """
    if rate <= 0.0 or rate >= 1.0:
        return rate
    a = rate * concentration
    b = (1.0 - rate) * concentration
    below_low, above_low = _partial_mean(rate, a, b, level / SPREAD_LEVELS)
    below_high, above_high = _partial_mean(rate, a, b, (level + 1) / SPREAD_LEVELS)
    if below_low is not None and below_high is not None:
        share = below_high - below_low
    elif above_low is not None and above_high is not None:
        share = above_low - above_high
    else:  # the quantiles fall on either side of 1/2
        assert below_low is not None and above_high is not None
        share = rate - above_high - below_low
    return min(max(share * SPREAD_LEVELS, 0.0), 1.0)


def _partial_mean(
    rate: float, a: float, b: float, quantile: float
) -> tuple[float | None, float | None]:
    """``E[X; F(X) <= q]`` or ``E[X; F(X) > q]`` for ``X ~ Beta(a, b)``: the one known accurately.

    Returns ``(below, None)`` where the quantile ``x`` is at most 1/2 (then
    ``below = rate I_x(a + 1, b)``, which keeps its digits even where ``x``
    underflows), else ``(None, above)`` from the mirrored variable ``Y = 1 -
    X ~ Beta(b, a)`` and its quantile ``y`` at ``1 - q``: ``above = (1 - q) -
    (1 - rate) I_y(b + 1, a)``. Near 1, ``x`` itself rounds to 1 and
    ``I_x`` loses the mass packed just below 1; ``y`` does not.
    """
    from scipy import special  # about 0.1 s to import: only when used

    if quantile <= 0.0:
        return 0.0, None
    if quantile >= 1.0:
        return None, 0.0
    x = float(special.betaincinv(a, b, quantile))
    if x <= 0.5:
        return rate * float(special.betainc(a + 1.0, b, x)), None
    y = float(special.betaincinv(b, a, 1.0 - quantile))
    return None, (1.0 - quantile) - (1.0 - rate) * float(special.betainc(b + 1.0, a, y))


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
