"""Whether a planning round runs its what-if windows, or keeps the configuration unseen.

Windows cost several times the simulated work they look ahead at, and a
round whose load is the load the last windows already weighed would reach
their decision again. With ``planner.replan_drift`` above 0, a round runs
its windows only when one of these holds (else it keeps the configuration
and says why):

1. no round has run windows yet, or, hill climbing, the last one changed
   the configuration (the climb goes on from the new one: its neighbours
   have not been weighed; a grid weighed every candidate already);
2. **the load moved**: the tokens (prompt plus output) of the arrivals the
   round would replay (:mod:`simulator.planner.forecast`) differ from those
   of the last windowed round by more than ``replan_drift`` of the latter,
   *and* by more than two standard deviations of the counting noise of two
   Poisson windows (a 95 % two-sided test: the difference over the square
   root of both windows' sums of squared request tokens, the variance of a
   compound Poisson sum), so that the noise of a steady rate never
   re-plans; or the run's unfinished requests (the backlog the window takes
   up) differ in number by more than ``replan_drift`` and two standard
   deviations (the difference over the square root of their sum): a
   decision made while a backlog drained is weighed again once it has;
3. **the estimate missed**: at least ``min_requests`` requests completed
   in the last ``window_s`` seconds and their SLO attainment is more than
   ``replan_drift`` (as a share of requests) below what the last windowed
   round estimated for the configuration it left in place, *and* by more
   than two standard deviations of the sampling noise of both shares (a
   two-proportion test: the difference over the square root of
   p (1 - p) (1 / n_seen + 1 / n_window), p the pooled share, n_seen the
   completed requests and n_window the requests the estimate's window
   held), so that a few unlucky requests never re-plan.

With ``replan_drift: 0`` every round runs its windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.planner.forecast import Load

NOISE_SIGMAS = 2.0
"""Standard deviations of counting noise a load change must exceed (a 95 % two-sided test)."""


@dataclass(frozen=True)
class Windowed:
    """What the last round that ran windows saw and expected.

    Attributes:
        at_s: Its time.
        load: The load it replayed.
        slo_attainment: Its windows' estimate for the configuration it left in place.
        climbing: Whether it changed the configuration by hill climbing.
    """

    at_s: float
    load: Load
    slo_attainment: float
    climbing: bool


def change(now: float, then: float, variance: float) -> tuple[float, float]:
    """The relative change from ``then`` to ``now`` and its size in noise deviations."""
    difference = now - then
    relative = difference / then if then > 0 else (math.inf if difference else 0.0)
    sigmas = abs(difference) / math.sqrt(variance) if variance > 0 else 0.0
    return relative, sigmas


def load_change(now: Load, then: Load) -> tuple[float, float]:
    """The relative change in tokens from ``then`` to ``now`` and its size in noise deviations."""
    return change(now.tokens, then.tokens, now.tokens_sq + then.tokens_sq)


def backlog_change(now: Load, then: Load) -> tuple[float, float]:
    """The relative change in unfinished requests and its size in noise deviations."""
    return change(now.backlog, then.backlog, now.backlog + then.backlog)


def attainment_change(attainment: float, completed: int, last: Windowed) -> float:
    """How many noise deviations the attainment seen lies below the last estimate.

    A two-proportion test with the pooled share; a difference with no noise
    (both shares 0 or 1) is infinitely many deviations.
    """
    estimated = last.load.requests + last.load.backlog
    seen = attainment * completed
    pooled = (seen + last.slo_attainment * estimated) / (completed + estimated)
    variance = pooled * (1.0 - pooled) * (1.0 / completed + 1.0 / max(estimated, 1))
    difference = last.slo_attainment - attainment
    return difference / math.sqrt(variance) if variance > 0 else math.inf


def _text(relative: float, sigmas: float) -> str:
    """A change as the log says it."""
    amount = f"{relative * 100:+.1f} %" if math.isfinite(relative) else "from none"
    return f"{amount} ({sigmas:.1f} sd)"


def _moved(relative: float, sigmas: float, drift: float) -> bool:
    """Whether a change exceeds both the drift and the noise."""
    return abs(relative) > drift and sigmas > NOISE_SIGMAS


def replan_reason(
    drift: float,
    last: Windowed | None,
    now: Load,
    completed: int,
    attainment: float,
    min_requests: int,
) -> tuple[bool, str]:
    """Whether a round runs windows, and why (the log's ``replan``).

    Args:
        drift: ``planner.replan_drift``.
        last: The last round that ran windows (``None``: none yet).
        now: The load the round would replay.
        completed: Requests completed in the last ``window_s`` seconds.
        attainment: Their SLO attainment (nan: none).
        min_requests: ``planner.min_requests``.
    """
    if drift <= 0:
        return True, "every round (replan_drift 0)"
    if last is None:
        return True, "first windows"
    if last.climbing:
        return True, f"climbing on from the change at {last.at_s:g} s"
    tokens = load_change(now, last.load)
    backlog = backlog_change(now, last.load)
    moved = f"tokens {_text(*tokens)}, unfinished {_text(*backlog)} since {last.at_s:g} s"
    if _moved(*tokens, drift) or _moved(*backlog, drift):
        return True, f"load moved: {moved}"
    if completed >= min_requests and attainment < last.slo_attainment - drift:
        sigmas = attainment_change(attainment, completed, last)
        if sigmas > NOISE_SIGMAS:
            return True, (
                f"estimate missed: attainment {attainment:.3f} against"
                f" {last.slo_attainment:.3f} estimated at {last.at_s:g} s ({sigmas:.1f} sd)"
            )
    return False, f"load as before: {moved}, within replan_drift {drift * 100:g} % or the noise"
