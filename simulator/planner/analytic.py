"""An analytic estimate of a candidate's goodput: the planner's optional pre-filter.

With ``planner.analytic_keep: M`` the planner runs what-if windows only for
the ``M`` candidates this estimate ranks best (the window decides among
them). The estimate is a mean-value model of the recent arrivals served by
the candidate's runtime, from the same LUTs and acceptance curves the
engine prices iterations with; it takes microseconds per candidate where a
window takes a simulation.

For every group of recent requests with the same origin, SLO class and kind
of work (``verify`` for drafts from a client device, ``fused``, or plain
``decode``), spread evenly over the replicas of the pools its origin reaches
whose role serves it (a planner's draft/verify split):

- a round commits ``E`` tokens: ``expected_tokens_per_verify(k, context)``
  of its acceptance curve (1 for plain decoding), with ``k`` the scenario's
  first-round draft length and the context the prompt plus half the output;
- an iteration of ``B`` requests takes ``T(B)``: the replica's LUT at that
  batch, ``k`` and context;
- a ``verify`` round cycles through the device's ``k`` draft steps (its
  first drafter model's LUT), the link's round trip, on average half an
  iteration of waiting for the replica and its own iteration:
  ``c = d + rtt + 1.5 T(B)``; a ``fused`` or ``decode`` request is in every
  iteration: ``c = T(B)``;
- Little's law gives the requests decoding on a replica, ``L = r O c / E``
  (``r``: the group's arrival rate per replica, ``O``: its mean output),
  and the batch ``B``: the bundles that arrive during an iteration
  (``L T / c`` for verify), or every one of them (``L`` otherwise), at
  least 1 and at most the decode lane's ``max_batch`` and
  ``max_running_requests`` (solved by fixed-point iteration);
- the replica's utilisation ``rho`` adds each kind's iterations per second
  times ``T(B)`` and each request's batch-1 prefill;
- TPOT is ``c / E``; TTFT the link's round trip plus the prefill stretched
  by ``1 / (1 - rho)`` (the M/M/1 sojourn factor);
- a request's TVT is its largest over its rounds. Its shortest is the round
  trip plus one iteration. A bundle that finds the replica busy waits for
  the running iteration, counted whole: requests whose rounds take the same
  time fall into step and share iterations, so the iteration a late bundle
  meets has just started. When such a wait breaks the TVT target, the
  share of the group's requests that meet it is ``1 - rho`` (the chance a
  round finds the replica idle, taken once per request: after its first
  meeting a request runs in step with the others).

A group's requests meet their SLOs when the replica is not overloaded
(``rho < 1``) and the predicted TTFT, TPOT and shortest TVT are within its
class's targets, in the TVT share above. The estimate is the arrival rate
of the requests predicted to meet them per GPU of the candidate.
Candidates rank by it (higher first), then by how far the worst predicted
figure is from its target (``max(rho, prediction / target)``, lower first),
so an overloaded candidate closest to coping ranks first among those that
meet nothing.

It is a mean-value model: it ignores the spread of lengths and of
acceptance, burstiness beyond the M/M/1 factor, KV limits, thermal
throttling, adaptive draft lengths and batching timeouts. That is why it
only pre-filters: the windows of the ``M`` best decide. A fleet of prefill
and decode pools is estimated by :mod:`simulator.planner.analytic_split`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from policies.lanes import DECODE, FUSED, VERIFY
from simulator.engine.runtime import ROLE_MODES, ClientPool, ReplicaPlan, Runtime
from simulator.workload import RequestTable, SloTargets

_FIXED_POINT_STEPS = 40
"""Iterations of the batch-size fixed point (it converges in a handful)."""

_MODE_OF = {VERIFY: "distributed", FUSED: "fused", DECODE: "none"}
"""The serving mode of each kind of work (what replica roles are defined by)."""

_WAIT_FACTOR = 1.5
"""A verify round spends half an iteration waiting for the running one, then its own."""


@dataclass(frozen=True)
class Estimate:
    """A candidate's analytic estimate.

    Attributes:
        goodput: Predicted requests meeting every SLO per GPU-second.
        worst_ratio: The largest of the replicas' utilisations and the
            predicted figures over their targets (below 1: all met).
    """

    goodput: float
    worst_ratio: float

    def rank(self) -> tuple[float, float]:
        """Sort key (smaller is better)."""
        return (-self.goodput, self.worst_ratio)


@dataclass(frozen=True)
class _Group:
    """Recent requests of one origin, SLO class and kind of work."""

    origin: str
    slo_class: str
    kind: str
    rate_per_s: float
    prompt_tokens: float
    output_tokens: float


@dataclass
class _KindLoad:
    """One kind of work on one replica: what the fixed point needs and finds."""

    rate_per_s: float = 0.0
    prompt_tokens: float = 0.0
    output_tokens: float = 0.0
    away_s: float = 0.0
    tokens_per_round: float = 1.0
    step_s: float = 0.0
    cycle_s: float = 0.0
    batch: float = 1.0


def estimate(
    runtime: Runtime, recent: RequestTable, window_s: float, fused_share: float
) -> Estimate:
    """Estimate the goodput of ``runtime`` serving arrivals like ``recent``.

    Args:
        runtime: The candidate's runtime (its replicas and settings).
        recent: The arrivals of the last ``window_s`` seconds.
        window_s: Their span (arrival rates are counts over it).
        fused_share: In mode hybrid, the share of requests served fused.
    """
    gpus = sum(plan.gpus for plan in runtime.replicas)
    if gpus == 0 or len(recent) == 0:
        return Estimate(0.0, math.inf)
    kinds_of: dict[tuple[str, str], list[ReplicaPlan]] = defaultdict(list)
    for plan in runtime.replicas:
        kinds_of[(plan.pool, plan.role)].append(plan)
    loads: dict[tuple[str, str], dict[str, _KindLoad]] = {key: {} for key in kinds_of}
    placed: list[tuple[_Group, dict[tuple[str, str], float]]] = []
    for group in _groups(runtime, recent, window_s, fused_share):
        shares = _spread(runtime, group, kinds_of)
        placed.append((group, shares))
        for key, share in shares.items():
            per_replica = group.rate_per_s * share / len(kinds_of[key])
            _add(loads[key], group, per_replica, runtime, kinds_of[key][0])
    rho = {key: _solve(runtime, kinds_of[key][0], kinds) for key, kinds in loads.items()}
    good_per_s = 0.0
    worst = 0.0
    for group, shares in placed:
        slo = recent.slo_of(group.slo_class)
        for key, share in shares.items():
            load = loads[key][group.kind]
            met, ratio = _meets(runtime, kinds_of[key][0], group, load, rho[key], slo)
            worst = max(worst, ratio)
            good_per_s += group.rate_per_s * share * met
    return Estimate(good_per_s / gpus, worst)


def _spread(
    runtime: Runtime, group: _Group, kinds_of: dict[tuple[str, str], list[ReplicaPlan]]
) -> dict[tuple[str, str], float]:
    """The share of a group's requests each kind of replica (pool, role) gets.

    Its requests go to the pools its origin reaches (every pool when it links
    to none) and there to the replicas whose role serves its mode (any of
    them when none does, as the router does), evenly per replica.
    """
    pools = {pool for pool, _role in kinds_of}
    reach: set[str] = set(pools)
    if group.origin:
        linked = {p for p in runtime.clients[group.origin].links if p in pools}
        reach = linked or reach
    mode = _MODE_OF[group.kind]
    keys = [k for k in kinds_of if k[0] in reach and mode in ROLE_MODES[k[1]]]
    keys = keys or [k for k in kinds_of if k[0] in reach]
    total = sum(len(kinds_of[k]) for k in keys)
    return {k: len(kinds_of[k]) / total for k in keys}


def _groups(
    runtime: Runtime, recent: RequestTable, window_s: float, fused_share: float
) -> list[_Group]:
    """The recent requests grouped by origin, SLO class and kind of work."""
    mode = runtime.settings.mode
    out: list[_Group] = []
    keys = sorted(set(zip(recent.origin.tolist(), recent.slo_class.tolist(), strict=True)))
    for origin, slo_class in keys:
        mask = (recent.origin == origin) & (recent.slo_class == slo_class)
        rate = float(mask.sum()) / window_s
        prompt = float(np.mean(recent.prompt_tokens[mask]))
        output = float(np.mean(recent.output_tokens[mask]))
        drafts = bool(origin) and bool(runtime.clients[origin].models)
        if mode == "distributed" and drafts:
            kinds = [(VERIFY, 1.0)]
        elif mode == "hybrid" and drafts:
            kinds = [(FUSED, fused_share), (VERIFY, 1.0 - fused_share)]
        elif mode in ("fused", "hybrid"):
            kinds = [(FUSED, 1.0)]
        else:
            kinds = [(DECODE, 1.0)]
        for kind, share in kinds:
            if share > 0:
                out.append(_Group(origin, slo_class, kind, rate * share, prompt, output))
    return out


def _add(
    kinds: dict[str, _KindLoad],
    group: _Group,
    rate_per_s: float,
    runtime: Runtime,
    plan: ReplicaPlan,
) -> None:
    """Add a group's per-replica arrivals to its kind's load on ``plan`` (rate-weighted means)."""
    load = kinds.setdefault(group.kind, _KindLoad())
    total = load.rate_per_s + rate_per_s
    if total <= 0:
        return
    old = load.rate_per_s / total
    new = rate_per_s / total
    load.prompt_tokens = old * load.prompt_tokens + new * group.prompt_tokens
    load.output_tokens = old * load.output_tokens + new * group.output_tokens
    load.away_s = old * load.away_s + new * _away_s(runtime, group, plan)
    context = group.prompt_tokens + group.output_tokens / 2.0
    tokens = _tokens_per_round(runtime, plan, group.kind, group.origin, context)
    load.tokens_per_round = old * load.tokens_per_round + new * tokens
    load.rate_per_s = total


def _context(load: _KindLoad) -> float:
    return load.prompt_tokens + load.output_tokens / 2.0


def _client(runtime: Runtime, origin: str) -> ClientPool | None:
    return runtime.clients.get(origin) if origin else None


def _rtt_s(runtime: Runtime, group: _Group, plan: ReplicaPlan) -> float:
    """The round trip of the group's link to the replica's pool (0 without one)."""
    client = _client(runtime, group.origin)
    link = client.links.get(plan.pool) if client is not None else None
    return link.rtt_ms / 1000.0 if link is not None else 0.0


def _away_s(runtime: Runtime, group: _Group, plan: ReplicaPlan) -> float:
    """A verify round's time away from the replica: ``k`` draft steps and the round trip."""
    client = _client(runtime, group.origin)
    if group.kind != VERIFY or client is None or client.draft is None:
        return 0.0
    context = group.prompt_tokens + group.output_tokens / 2.0
    k = runtime.settings.k
    return client.draft.curve(1.0, 1).sum_steps(context, k)[0] + _rtt_s(runtime, group, plan)


def _tokens_per_round(
    runtime: Runtime, plan: ReplicaPlan, kind: str, origin: str, context: float
) -> float:
    """``E``: expected tokens a round commits (1 for a plain decode step)."""
    k = runtime.settings.k
    temperature = runtime.settings.temperature
    if kind == FUSED and plan.fused_acceptance is not None:
        return plan.fused_acceptance.expected_tokens_per_verify(k, int(context), temperature)
    client = _client(runtime, origin)
    if kind == VERIFY and client is not None and client.acceptance is not None:
        return client.acceptance.expected_tokens_per_verify(k, int(context), temperature)
    return 1.0


def _solve(runtime: Runtime, plan: ReplicaPlan, kinds: dict[str, _KindLoad]) -> float:
    """Solve every kind's batch on one replica of ``plan``'s pool; return its utilisation."""
    scheduler = runtime.settings.scheduler
    cap = float(min(scheduler.verify.limits.max_batch, scheduler.max_running_requests))
    k = runtime.settings.k
    busy = 0.0
    for kind, load in kinds.items():
        step = plan.costs.step[kind]
        context = _context(load)
        fanout = 1 if kind == DECODE else k
        for _ in range(_FIXED_POINT_STEPS):
            load.step_s = step.at(context, load.batch, fanout)[0] if step is not None else math.inf
            if kind == VERIFY:
                load.cycle_s = load.away_s + _WAIT_FACTOR * load.step_s
            else:
                load.cycle_s = load.step_s
            decoding = load.rate_per_s * load.output_tokens * load.cycle_s / load.tokens_per_round
            share = load.step_s / load.cycle_s if kind == VERIFY else 1.0
            batch = min(cap, max(1.0, decoding * share))
            if abs(batch - load.batch) < 1e-6:
                break
            load.batch = batch
        rounds_per_s = load.rate_per_s * load.output_tokens / load.tokens_per_round
        busy += rounds_per_s / load.batch * load.step_s
        prefill = plan.costs.prefill[kind]
        if prefill is not None:
            busy += load.rate_per_s * prefill.at(load.prompt_tokens, 1.0, 1)[0]
    return busy


def _meets(
    runtime: Runtime,
    plan: ReplicaPlan,
    group: _Group,
    load: _KindLoad,
    rho: float,
    slo: SloTargets,
) -> tuple[float, float]:
    """The share of a group's requests predicted to meet every SLO, and the worst ratio.

    The worst ratio is the largest of ``rho`` and the predicted TTFT, TPOT
    and shortest TVT (``rtt + T(B)``) over their targets; from 1 on, the
    share is 0. Otherwise it is 1, except when waiting for one running
    iteration would break the TVT target (``rtt + 2 T(B) > tvt``): then it
    is ``1 - rho`` (see the module docstring).
    """
    rtt_s = _rtt_s(runtime, group, plan)
    prefill = plan.costs.prefill[group.kind]
    prefill_s = prefill.at(group.prompt_tokens, 1.0, 1)[0] if prefill is not None else 0.0
    ttft_s = rtt_s + (prefill_s / (1.0 - rho) if rho < 1.0 else math.inf)
    tpot_s = load.cycle_s / load.tokens_per_round
    ratios = [rho, ttft_s * 1000.0 / slo.ttft_ms, tpot_s * 1000.0 / slo.tpot_ms]
    share = 1.0
    if group.kind == VERIFY and slo.tvt_ms is not None:
        fastest_s = rtt_s + load.step_s
        ratios.append(fastest_s * 1000.0 / slo.tvt_ms)
        if fastest_s + load.step_s > slo.tvt_ms / 1000.0:
            share = 1.0 - min(1.0, rho)  # a round that finds the replica busy misses
    worst = max(ratios)
    return (share if worst < 1.0 else 0.0), worst
