"""Candidate configurations of the goodput planner, and the runtime each one runs with.

A candidate sets some of: the number of serving replicas of every target
pool (``verify_replicas``) and the hybrid policy's fused share
(``fused_fraction``). The candidates are every combination of the listed
values, in the listed order (the first key varies slowest).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from policies.hybrid import FusedFractionParams
from simulator.devices.model import Availability, AvailabilityWindow
from simulator.engine.runtime import ReplicaPlan, Runtime
from simulator.scenario.model import PolicyChoice

CANDIDATE_KEYS = ("verify_replicas", "fused_fraction")
"""The candidate keys the planner applies, in enumeration order."""

_NEVER_S = 1e15
"""End of a loading replica's availability in a window (later than any run)."""


@dataclass(frozen=True)
class Candidate:
    """One configuration the planner may choose.

    Attributes:
        verify_replicas: Serving replicas of every target pool (``None``: unchanged).
        fused_fraction: The hybrid policy's fused share (``None``: unchanged).
    """

    verify_replicas: int | None = None
    fused_fraction: float | None = None

    @property
    def key(self) -> str:
        """A compact ``key=value`` text naming it (the planner log's ``candidate``)."""
        parts = [
            f"{name}={value:g}"
            for name in CANDIDATE_KEYS
            if (value := getattr(self, name)) is not None
        ]
        return " ".join(parts)


def enumerate_candidates(values: Mapping[str, Sequence[float]]) -> list[Candidate]:
    """Every combination of the listed candidate values (duplicates kept once, first wins)."""
    keys = [k for k in CANDIDATE_KEYS if k in values]
    out: list[Candidate] = []
    for combo in itertools.product(*(values[k] for k in keys)):
        fields = dict(zip(keys, combo, strict=True))
        candidate = Candidate(
            verify_replicas=int(fields["verify_replicas"]) if "verify_replicas" in fields else None,
            fused_fraction=float(fields["fused_fraction"]) if "fused_fraction" in fields else None,
        )
        if candidate not in out:
            out.append(candidate)
    return out


def make_candidate(values: Mapping[str, Sequence[float]], position: Mapping[str, int]) -> Candidate:
    """The candidate at ``position`` (an index into each key's list of values)."""
    replicas = (
        values["verify_replicas"][position["verify_replicas"]]
        if "verify_replicas" in position
        else None
    )
    fraction = (
        values["fused_fraction"][position["fused_fraction"]]
        if "fused_fraction" in position
        else None
    )
    return Candidate(
        verify_replicas=int(replicas) if replicas is not None else None,
        fused_fraction=float(fraction) if fraction is not None else None,
    )


def neighbours(
    values: Mapping[str, Sequence[float]], position: Mapping[str, int]
) -> list[dict[str, int]]:
    """Hill-climb moves from ``position``: itself, then one step down and up along each key."""
    out = [dict(position)]
    for key in CANDIDATE_KEYS:
        if key not in position:
            continue
        for step in (-1, 1):
            index = position[key] + step
            if 0 <= index < len(values[key]):
                out.append({**position, key: index})
    return out


def nearest_index(options: Sequence[float], value: float) -> int:
    """Index of the option nearest ``value`` (ties: the earlier)."""
    return min(range(len(options)), key=lambda i: (abs(options[i] - value), i))


def pools_of(runtime: Runtime) -> list[str]:
    """The target pools in scenario order."""
    return list(dict.fromkeys(plan.pool for plan in runtime.replicas))


def replica_counts(candidate: Candidate, current: Mapping[str, int]) -> dict[str, int]:
    """Serving replicas of each pool under ``candidate`` (``current``: today's)."""
    if candidate.verify_replicas is None:
        return dict(current)
    return dict.fromkeys(current, candidate.verify_replicas)


def candidate_runtime(
    runtime: Runtime,
    candidate: Candidate,
    counts: Mapping[str, int],
    ready_s: Mapping[str, Sequence[float]],
) -> Runtime:
    """The runtime a what-if window of ``candidate`` runs with.

    Each pool has ``counts[pool]`` replicas (its first plan repeated, pools
    in scenario order). Replica ``i`` of a pool takes work from
    ``ready_s[pool][i]`` when that is given (a replica loading its model);
    a pool with availability windows of its own keeps them instead.

    Args:
        runtime: The run's runtime.
        candidate: The configuration.
        counts: Replicas per pool (see :func:`replica_counts`).
        ready_s: When each replica of a pool takes work (missing: now).
    """
    first: dict[str, ReplicaPlan] = {}
    for plan in runtime.replicas:
        first.setdefault(plan.pool, plan)
    replicas: list[ReplicaPlan] = []
    for pool, plan in first.items():
        ready = ready_s.get(pool, ())
        for i in range(counts[pool]):
            at_s = ready[i] if i < len(ready) else -math.inf
            if math.isfinite(at_s) and plan.availability.kind == "always":
                window = AvailabilityWindow(at_s, _NEVER_S)
                replicas.append(
                    replace(plan, availability=Availability("windows", _NEVER_S, (window,)))
                )
            else:
                replicas.append(plan)
    settings = runtime.settings
    if candidate.fused_fraction is not None:
        settings = replace(settings, hybrid=fused_fraction_choice(candidate.fused_fraction))
    return replace(runtime, replicas=tuple(replicas), settings=settings)


def fused_fraction_choice(fraction: float) -> PolicyChoice:
    """The ``fused_fraction`` hybrid policy with share ``fraction``."""
    return PolicyChoice("hybrid_mode", "fused_fraction", FusedFractionParams(fraction))
