"""Candidate configurations of the goodput planner, and the runtime each one runs with.

A candidate gives a value to each key listed in ``planner.candidates``
(the keys are the knobs of :mod:`simulator.planner.knobs`). The candidates
are every combination of the listed values, keys in the knobs' order (the
first varies slowest), values in the listed order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from simulator.engine.core import Engine
from simulator.engine.runtime import ReplicaPlan, Runtime, loading_plan
from simulator.planner.knobs import KNOBS, Value


@dataclass(frozen=True)
class Candidate:
    """One configuration the planner may choose.

    Attributes:
        values: ``(key, value)`` for every candidate key, in the knobs' order.
    """

    values: tuple[tuple[str, Value], ...] = ()

    def get(self, name: str) -> Value | None:
        """The candidate's value of key ``name`` (``None``: it leaves the key unchanged)."""
        for key, value in self.values:
            if key == name:
                return value
        return None

    @property
    def key(self) -> str:
        """A compact ``key=value`` text naming it (the planner log's ``candidate``)."""
        return " ".join(f"{name}={_text(value)}" for name, value in self.values)


def _text(value: Value) -> str:
    """A number compactly (``4``, ``0.25``), a name as it is."""
    return value if isinstance(value, str) else f"{value:g}"


def _value(value: Value) -> Value:
    """A listed value as candidates hold it: numbers as floats, names as they are."""
    return value if isinstance(value, str) else float(value)


def candidate_keys(values: Mapping[str, Sequence[Value]]) -> list[str]:
    """The keys listed in ``values``, in the knobs' order."""
    return [name for name in KNOBS if name in values]


def enumerate_candidates(values: Mapping[str, Sequence[Value]]) -> list[Candidate]:
    """Every combination of the listed candidate values (duplicates kept once, first wins)."""
    keys = candidate_keys(values)
    out: dict[Candidate, None] = {}
    for combo in itertools.product(*(values[k] for k in keys)):
        out.setdefault(Candidate(tuple(zip(keys, (_value(v) for v in combo), strict=True))))
    return list(out)


def make_candidate(values: Mapping[str, Sequence[Value]], position: Mapping[str, int]) -> Candidate:
    """The candidate at ``position`` (an index into each key's list of values)."""
    return Candidate(tuple((k, _value(values[k][position[k]])) for k in KNOBS if k in position))


def neighbours(
    values: Mapping[str, Sequence[Value]], position: Mapping[str, int]
) -> list[dict[str, int]]:
    """Hill-climb moves from ``position``: itself, then one step down and up along each key."""
    out = [dict(position)]
    for key in KNOBS:
        if key not in position:
            continue
        for step in (-1, 1):
            index = position[key] + step
            if 0 <= index < len(values[key]):
                out.append({**position, key: index})
    return out


def nearest_index(options: Sequence[Value], value: Value) -> int:
    """Index of the option nearest ``value`` (ties: the earlier).

    Names: the index of the equal name (none equal: 0, the first listed).
    """
    if isinstance(value, str):
        return next((i for i, option in enumerate(options) if option == value), 0)
    return min(
        range(len(options)),
        key=lambda i: (abs(float(options[i]) - value), i),
    )


def pools_of(runtime: Runtime) -> list[str]:
    """The target pools in scenario order."""
    return list(dict.fromkeys(plan.pool for plan in runtime.replicas))


ROLE_KEYS = {"prefill": "prefill_replicas", "decode": "decode_replicas"}
"""The candidate key giving the replicas of every pool of each disaggregated role."""


def pool_roles(runtime: Runtime) -> dict[str, str]:
    """What each target pool's replicas serve (``colocated``, ``prefill``, ``decode``)."""
    return {plan.pool: plan.serves for plan in runtime.replicas}


def sets_roles(candidate: Candidate) -> bool:
    """Whether the candidate sizes a disaggregated fleet's prefill or decode pools."""
    return any(candidate.get(key) is not None for key in ROLE_KEYS.values())


def replica_counts(
    candidate: Candidate,
    current: Mapping[str, int],
    verifying: Mapping[str, int] | None = None,
    roles: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Replicas of each pool under ``candidate`` (``current``: today's).

    With a ``draft_replicas`` value ``d`` a pool has ``d`` draft replicas
    and ``v`` verify replicas: ``v`` from ``verify_replicas``, or the pool's
    verify replicas now (``verifying``; all its replicas before any split).
    With ``prefill_replicas`` or ``decode_replicas`` every pool of that role
    (``roles``: each pool's) has the value, the others keep theirs.
    """
    if roles is not None and sets_roles(candidate):
        out = dict(current)
        for pool in current:
            value = candidate.get(ROLE_KEYS.get(roles[pool], ""))
            if value is not None:
                out[pool] = int(value)
        return out
    replicas = candidate.get("verify_replicas")
    draft = candidate.get("draft_replicas")
    if draft is None:
        if replicas is None:
            return dict(current)
        return dict.fromkeys(current, int(replicas))
    verify = verifying if verifying is not None else current
    return {
        pool: int(draft) + (int(replicas) if replicas is not None else verify[pool])
        for pool in current
    }


def reloaded_pools(engine: Engine, candidate: Candidate) -> set[str]:
    """The pools whose replicas the candidate's ``tensor_parallel`` degree replaces (a reload)."""
    degree = candidate.get("tensor_parallel")
    if degree is None:
        return set()
    return {pool for pool in engine.serving_counts() if engine.tensor_parallel(pool) != degree}


def window_ready_times(
    engine: Engine, candidate: Candidate, counts: dict[str, int], load_s: float
) -> dict[str, list[float]]:
    """When each replica of a candidate's window takes work (see ``candidate_runtime``).

    As :meth:`Engine.ready_times`, except in a pool the candidate reloads at
    another tensor-parallel degree: every replica is new there, ready after ``load_s``.
    """
    ready = engine.ready_times(counts, load_s)
    ready_s = engine.env.now + load_s
    for pool in reloaded_pools(engine, candidate):
        ready[pool] = [ready_s] * counts[pool]
    return ready


def apply_replicas(engine: Engine, candidate: Candidate, load_s: float) -> None:
    """Give the running engine the candidate's replicas, from now on.

    Its ``verify_replicas`` and ``draft_replicas`` keys act together (see
    :func:`replica_counts`), as do ``prefill_replicas`` and
    ``decode_replicas`` (a pool whose count changes is resized:
    :meth:`Engine.set_replica_count`); new replicas load for ``load_s``. With a
    ``tensor_parallel`` degree other than a pool's, the pool's replicas
    drain and as many (or ``verify_replicas``) of that degree start loading
    (:meth:`Engine.set_replica_plan`; the scenario refuses it with ``draft_replicas``).
    """
    if sets_roles(candidate):
        counts = engine.serving_counts()
        wanted = replica_counts(candidate, counts, roles=pool_roles(engine.runtime))
        for pool, count in wanted.items():
            if count != counts[pool]:
                engine.set_replica_count(pool, count, load_s)
        return
    replicas = candidate.get("verify_replicas")
    draft = candidate.get("draft_replicas")
    degree = candidate.get("tensor_parallel")
    if degree is not None:
        plans = engine.runtime.tensor_parallel_plans
        for pool, serving in engine.serving_counts().items():
            count = int(replicas) if replicas is not None else serving
            if engine.tensor_parallel(pool) != degree:
                engine.set_replica_plan(pool, plans[(pool, int(degree))], count, load_s)
            else:
                engine.set_replica_count(pool, count, load_s)
        return
    if draft is None:
        if replicas is not None:
            for pool in engine.serving_counts():
                engine.set_replica_count(pool, int(replicas), load_s)
        return
    for pool, verifying in engine.role_counts("verify").items():
        verify = int(replicas) if replicas is not None else verifying
        engine.set_replica_split(pool, int(draft), verify, load_s)


def candidate_runtime(
    runtime: Runtime,
    candidate: Candidate,
    counts: Mapping[str, int],
    ready_s: Mapping[str, Sequence[float]],
) -> Runtime:
    """The runtime a what-if window of ``candidate`` runs with.

    Each pool has ``counts[pool]`` replicas (its first plan repeated, pools
    in scenario order). With a ``draft_replicas`` value ``d``, the last
    ``d`` replicas of each pool draft and the others verify (the roles
    :meth:`Engine.set_replica_split` gives). Replica ``i`` of a pool takes work from
    ``ready_s[pool][i]`` when that is given (a replica loading its model);
    a pool with availability windows of its own keeps them instead. Every
    other key of the candidate sets its knob's part of the runtime.

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
    draft = candidate.get("draft_replicas")
    for pool, first_plan in first.items():
        ready = ready_s.get(pool, ())
        for i in range(counts[pool]):
            plan = first_plan
            if draft is not None:
                role = "verify" if i < counts[pool] - int(draft) else "draft"
                plan = replace(plan, role=role)
            at_s = ready[i] if i < len(ready) else -math.inf
            replicas.append(loading_plan(plan, at_s) if math.isfinite(at_s) else plan)
    out = replace(runtime, replicas=tuple(replicas))
    for name, value in candidate.values:
        out = KNOBS[name].window_runtime(out, value)
    return out
