"""Bounds on the online planner's work, checked before a run starts (see :mod:`simulator.limits`).

:func:`planner_size_issues` checks the ``planner`` section itself (the number
of candidates, ``interval_s``, ``window_s`` and the replicas a candidate
asks for); :func:`planner_window_issues` checks the what-if windows a run
would make, from its request table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.errors import Issue, make_issue
from simulator.limits import (
    MAX_PLANNER_CANDIDATES,
    MAX_PLANNER_WINDOW_RATIO,
    MAX_PLANNER_WINDOWS,
    MAX_TARGET_REPLICAS,
    MIN_PLANNER_INTERVAL_S,
)
from simulator.scenario.model import PlannerSpec


def candidate_count(candidates: Mapping[str, Sequence[Any]]) -> int:
    """Candidates before repeated combinations are dropped: the product of the lists' lengths."""
    return math.prod(len(values) for values in candidates.values())


def windows_per_round(planner: PlannerSpec) -> int:
    """The most what-if windows one planning round runs."""
    count = candidate_count(planner.candidates)
    if planner.search == "hill_climb":
        count = min(count, 1 + 2 * len(planner.candidates))
    if planner.analytic_keep is not None:
        count = min(count, int(planner.analytic_keep))
    return count


def _replica_issues(
    file: Path, candidates: Mapping[str, Sequence[Any]], targets: Sequence[int]
) -> list[Issue]:
    """A candidate with more target replicas than a run may hold (every pool gets its value)."""
    verify = candidates.get("verify_replicas")
    draft = candidates.get("draft_replicas")
    if not targets or (verify is None and draft is None):
        return []
    pools = len(targets)
    serving = pools * max(verify) if verify is not None else sum(targets)
    total = serving + (pools * max(draft) if draft is not None else 0)
    if total <= MAX_TARGET_REPLICAS:
        return []
    key, values = ("verify_replicas", verify) if verify is not None else ("draft_replicas", draft)
    return [
        make_issue(
            file,
            f"planner.candidates.{key}",
            list(values or ()),
            f"values giving at most {MAX_TARGET_REPLICAS:,} target replicas in all target "
            f"classes together (each of the {pools} target pools gets the value)",
            f"a candidate with {total:,} target replicas",
        )
    ]


def planner_size_issues(file: Path, raw: Mapping[str, Any], targets: Sequence[int]) -> list[Issue]:
    """Refuse a planner section whose work has no reasonable bound.

    Args:
        file: The scenario file.
        raw: The ``planner`` section (defaults filled, enabled).
        targets: The ``count`` of every target class.
    """
    issues: list[Issue] = []
    candidates: Mapping[str, Sequence[Any]] = raw["candidates"]
    count = candidate_count(candidates)
    if count > MAX_PLANNER_CANDIDATES:
        lengths = " x ".join(str(len(v)) for v in candidates.values())
        issues.append(
            make_issue(
                file,
                "planner.candidates",
                f"{lengths} = {count:,} candidates",
                f"at most {MAX_PLANNER_CANDIDATES:,} candidates (the product of the lists' "
                "lengths; each one gets a what-if window every round)",
                "too many candidates",
            )
        )
    interval = float(raw["interval_s"])
    if interval < MIN_PLANNER_INTERVAL_S:
        issues.append(
            make_issue(
                file,
                "planner.interval_s",
                raw["interval_s"],
                f">= {MIN_PLANNER_INTERVAL_S:g} s (every round runs a what-if window per "
                "candidate)",
                "planning rounds too frequent",
            )
        )
    elif float(raw["window_s"]) > MAX_PLANNER_WINDOW_RATIO * interval:
        issues.append(
            make_issue(
                file,
                "planner.window_s",
                raw["window_s"],
                f"<= {MAX_PLANNER_WINDOW_RATIO} x planner.interval_s "
                f"({MAX_PLANNER_WINDOW_RATIO * interval:g} s): each round replays the arrivals "
                "of the last window_s seconds for every candidate",
                "what-if window too long",
            )
        )
    return issues + _replica_issues(file, candidates, targets)


def planner_window_issues(
    file: Path, planner: PlannerSpec, last_arrival_s: float, until_s: float | None
) -> list[Issue]:
    """Refuse a run whose planner would run more than :data:`MAX_PLANNER_WINDOWS` windows.

    Rounds are counted over the arrivals' span (up to ``until_s``), every
    ``interval_s``; rounds after the last arrival are not counted.
    """
    if not planner.enabled:
        return []
    horizon_s = last_arrival_s if until_s is None else min(last_arrival_s, until_s)
    per_round = windows_per_round(planner)
    rounds = (
        math.floor(horizon_s / planner.interval_s) + 1 if math.isfinite(horizon_s) else math.inf
    )
    windows = rounds * per_round
    if windows <= MAX_PLANNER_WINDOWS:
        return []
    rounds_allowed = MAX_PLANNER_WINDOWS // per_round
    longer = (
        f"> {horizon_s / rounds_allowed:.3g} s"
        if rounds_allowed > 0 and math.isfinite(horizon_s)
        else "a longer interval"
    )
    return [
        make_issue(
            file,
            "planner.interval_s",
            planner.interval_s,
            f"{longer} for arrivals over {horizon_s:.3g} s with {per_round:,} what-if windows "
            f"a round (at most {MAX_PLANNER_WINDOWS:,} windows per run), or fewer candidates",
            f"about {windows:,.0f} what-if windows",
        )
    ]
