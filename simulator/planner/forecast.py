"""What a planning round expects the next ``window_s`` seconds to bring.

A what-if window replays past arrivals from the round on. Which past:

- ``history_s == window_s`` (the default): the last ``window_s`` seconds,
  as they came (the next seconds look like the last ones);
- ``history_s > window_s``: the busiest ``window_s`` of the last
  ``history_s`` seconds, by tokens arrived (prompt plus output), so a
  configuration is sized for the recent peak and kept until that peak is
  ``history_s`` old. This is the rule of autoscalers that scale down only
  to the largest recommendation of a stabilisation window (Kubernetes'
  HorizontalPodAutoscaler, ``stabilizationWindowSeconds``): bursts shorter
  than the round's interval are not foreseen by the last seconds alone.

Early in the run, when fewer than ``window_s`` seconds have passed, the
seconds there are repeated back to back to fill the window (the rate is
kept). The replayed requests take ids after the run's table, so they never
clash with the run's unfinished ones.

:class:`Load` summarises a window's work (the forecast's tokens and the
run's unfinished requests) for the re-plan trigger (:mod:`simulator.planner.trigger`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from simulator.workload import RequestTable


@dataclass(frozen=True)
class Load:
    """The load a forecast brings: its requests and tokens.

    Attributes:
        requests: Requests it replays.
        tokens: Their prompt plus output tokens.
        tokens_sq: The sum of each request's tokens squared (the variance of
            ``tokens`` when arrivals are Poisson: a compound Poisson sum).
        backlog: The run's unfinished requests the window takes up.
    """

    requests: int
    tokens: float
    tokens_sq: float
    backlog: int = 0


def load_of(table: RequestTable, backlog: int = 0) -> Load:
    """The load of a window replaying ``table`` with ``backlog`` unfinished requests."""
    tokens = table.prompt_tokens.astype(np.float64) + table.output_tokens
    return Load(len(table), float(tokens.sum()), float(np.square(tokens).sum()), backlog)


def busiest_start_s(table: RequestTable, since_s: float, until_s: float, window_s: float) -> float:
    """Start of the ``window_s`` span within ``[since_s, until_s]`` that most tokens arrive in.

    The spans tried start at ``until_s - window_s`` and at every arrival
    from ``since_s`` on that leaves a whole span before ``until_s`` (a
    busiest span can always be moved to start at an arrival). Ties: the
    latest span.
    """
    latest = until_s - window_s
    arrival = table.arrival_s
    tokens = table.prompt_tokens.astype(np.float64) + table.output_tokens
    cumulative = np.concatenate(([0.0], np.cumsum(tokens)))
    lo, hi = np.searchsorted(arrival, [since_s, latest], side="left")
    starts = np.concatenate((arrival[lo:hi], [latest]))
    first = np.searchsorted(arrival, starts, side="left")
    end = np.searchsorted(arrival, starts + window_s, side="left")
    sums = cumulative[end] - cumulative[first]
    best = len(sums) - 1 - int(np.argmax(sums[::-1]))
    return float(starts[best])


def forecast(
    table: RequestTable, at_s: float, start_s: float, window_s: float, history_s: float
) -> RequestTable:
    """The arrivals a round at ``at_s`` replays from ``at_s`` on (see the module docstring).

    Args:
        table: The run's requests.
        at_s: The round's time.
        start_s: The run's start.
        window_s: The window's length.
        history_s: How far back the busiest span is looked for (at least ``window_s``).
    """
    span_s = min(window_s, at_s - start_s)
    begin_s = at_s - span_s
    if span_s >= window_s and history_s > window_s:
        since_s = max(start_s, at_s - history_s)
        begin_s = busiest_start_s(table, since_s, at_s, window_s)
    recent = table.window(begin_s, begin_s + span_s, rebase=False)
    copies = max(1, math.ceil(window_s / span_s - 1e-9))
    shift_s = at_s - begin_s
    arrival = np.concatenate([recent.arrival_s + shift_s + span_s * j for j in range(copies)])
    keep = arrival < at_s + window_s
    tile = partial(np.tile, reps=copies)
    return RequestTable(
        arrival_s=arrival[keep],
        prompt_tokens=tile(recent.prompt_tokens)[keep],
        output_tokens=tile(recent.output_tokens)[keep],
        slo_class=tile(recent.slo_class)[keep],
        origin=tile(recent.origin)[keep],
        category=tile(recent.category)[keep],
        slos=table.slos,
        first_id=table.first_id + len(table),
    )
