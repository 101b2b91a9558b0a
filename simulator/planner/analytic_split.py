"""The analytic pre-filter's estimate for a disaggregated fleet (prefill and decode pools).

The mean-value model of :mod:`simulator.planner.analytic`, with each
request's work split as the engine splits it: its prefill on a prefill
replica, its KV moved over the link between the two pools, its decoding on
a decode replica. For every group of recent requests (origin, SLO class,
kind of work):

- its requests go to the prefill pools its origin reaches (every one when
  it links to none), evenly per replica, and from each prefill pool to the
  decode pools linked to it (and to the origin), evenly per replica (the
  hand-over takes the decode replica with the fewest outstanding requests);
- a prefill replica's utilisation ``rho_p`` adds each group's batch-1
  prefills; each kind's batch, cycle and tokens per round on a decode
  replica come from the colocated model's fixed point; its load ``rho_d``
  is its rounds per second over those it runs at its largest batch
  (``min(max_batch, max_running_requests)``): a replica decoding
  continuously is busy whenever it holds a request, so its busy share
  would not tell saturation;
- TTFT is half the origin's round trip to the prefill pool, the prefill
  stretched by ``1 / (1 - rho_p)``, the KV transfer on an idle link
  (``bytes x 8 / bandwidth + rtt / 2``, :func:`~simulator.engine.kv_transfer.nominal_transfer_s`)
  and half the round trip from the decode pool; TPOT the decode cycle over
  the tokens per round.

A route's requests meet their SLOs when both replicas are below
saturation and TTFT and TPOT are within the class's targets. The estimate
is the arrival rate of the requests predicted to meet them per GPU;
candidates rank as in :mod:`~simulator.planner.analytic`. Beyond what that
model ignores, this one ignores the wait for a decode replica with room
(``scheduler.max_running_requests`` only caps the batch) and the queueing
of transfers on a prefill replica's link.
"""

from __future__ import annotations

import math
from collections import defaultdict

from policies.lanes import DECODE as DECODE_KIND
from simulator.engine.kv_transfer import kv_bytes, nominal_transfer_s
from simulator.engine.runtime import ReplicaPlan, Runtime
from simulator.planner.analytic import (
    Estimate,
    _add,
    _context,
    _Group,
    _groups,
    _KindLoad,
    _rtt_s,
    _solve,
)
from simulator.workload import RequestTable

PREFILL = "prefill"
DECODE = "decode"


def is_disaggregated(runtime: Runtime) -> bool:
    """Whether the runtime's fleet has prefill (and so decode) pools."""
    return any(plan.serves == PREFILL for plan in runtime.replicas)


def estimate_split(
    runtime: Runtime, recent: RequestTable, window_s: float, fused_share: float
) -> Estimate:
    """Estimate the goodput of the disaggregated ``runtime`` serving arrivals like ``recent``.

    Args:
        runtime: The candidate's runtime (its prefill and decode replicas).
        recent: The arrivals of the last ``window_s`` seconds.
        window_s: Their span (arrival rates are counts over it).
        fused_share: In mode hybrid, the share of requests served fused (unused: such
            fleets run modes none and fused).
    """
    gpus = sum(plan.gpus for plan in runtime.replicas)
    if gpus == 0 or len(recent) == 0:
        return Estimate(0.0, math.inf)
    pools: dict[str, list[ReplicaPlan]] = defaultdict(list)
    for plan in runtime.replicas:
        pools[plan.pool].append(plan)
    prefill_busy: dict[str, float] = dict.fromkeys(
        (p for p in pools if pools[p][0].serves == PREFILL), 0.0
    )
    decode_loads: dict[str, dict[str, _KindLoad]] = {
        p: {} for p in pools if pools[p][0].serves == DECODE
    }
    placed: list[tuple[_Group, dict[tuple[str, str], float]]] = []
    for group in _groups(runtime, recent, window_s, fused_share):
        routes = _routes(runtime, group, pools, list(prefill_busy), list(decode_loads))
        placed.append((group, routes))
        for (prefill, decode), share in routes.items():
            rate = group.rate_per_s * share
            plan = pools[prefill][0]
            cost = plan.costs.prefill[group.kind]
            if cost is not None:
                prefill_busy[prefill] += (
                    rate / len(pools[prefill]) * cost.at(group.prompt_tokens, 1.0, 1)[0]
                )
            _add(decode_loads[decode], group, rate / len(pools[decode]), runtime, pools[decode][0])
    rho_decode = {
        pool: _decoding_busy(runtime, pools[pool][0], kinds) for pool, kinds in decode_loads.items()
    }
    good_per_s = 0.0
    worst = 0.0
    for group, routes in placed:
        slo = recent.slo_of(group.slo_class)
        for (prefill, decode), share in routes.items():
            load = decode_loads[decode][group.kind]
            rho_p, rho_d = prefill_busy[prefill], rho_decode[decode]
            ttft_s = _ttft_s(runtime, group, pools[prefill][0], pools[decode][0], rho_p)
            tpot_s = load.cycle_s / load.tokens_per_round
            ratio = max(rho_p, rho_d, ttft_s * 1000.0 / slo.ttft_ms, tpot_s * 1000.0 / slo.tpot_ms)
            worst = max(worst, ratio)
            good_per_s += group.rate_per_s * share * (1.0 if ratio < 1.0 else 0.0)
    return Estimate(good_per_s / gpus, worst)


def _routes(
    runtime: Runtime,
    group: _Group,
    pools: dict[str, list[ReplicaPlan]],
    prefill: list[str],
    decode: list[str],
) -> dict[tuple[str, str], float]:
    """The share of a group's requests on each (prefill pool, decode pool) route."""
    client = runtime.clients.get(group.origin) if group.origin else None
    links = client.links if client is not None else {}
    entry = [p for p in prefill if p in links] or prefill
    total = sum(len(pools[p]) for p in entry)
    routes: dict[tuple[str, str], float] = {}
    for p in entry:
        ends = [d for d in decode if (p, d) in runtime.kv_links and (not links or d in links)]
        ends = ends or [d for d in decode if (p, d) in runtime.kv_links] or decode
        count = sum(len(pools[d]) for d in ends)
        for d in ends:
            routes[(p, d)] = len(pools[p]) / total * len(pools[d]) / count
    return routes


def _decoding_busy(runtime: Runtime, plan: ReplicaPlan, kinds: dict[str, _KindLoad]) -> float:
    """A decode replica's load: its rounds per second over those it runs at its largest batch.

    The colocated fixed point gives each kind's batch and cycle; but a
    replica decoding continuously is busy whenever it holds a request, so
    its busy share says nothing of saturation. The largest batch is
    ``min(max_batch, max_running_requests)``, at the kind's mean context.
    """
    _solve(runtime, plan, kinds)
    scheduler = runtime.settings.scheduler
    cap = float(min(scheduler.verify.limits.max_batch, scheduler.max_running_requests))
    load_share = 0.0
    for kind, load in kinds.items():
        step = plan.costs.step[kind]
        if step is None:
            return math.inf
        fanout = 1 if kind == DECODE_KIND else runtime.settings.k
        full_s = step.at(_context(load), cap, fanout)[0]
        rounds_per_s = load.rate_per_s * load.output_tokens / load.tokens_per_round
        load_share += rounds_per_s * full_s / cap
    return load_share


def _ttft_s(
    runtime: Runtime, group: _Group, prefill: ReplicaPlan, decode: ReplicaPlan, rho_p: float
) -> float:
    """Prompt up, queued prefill, KV moved on an idle link, first token down."""
    cost = prefill.costs.prefill[group.kind]
    prefill_s = cost.at(group.prompt_tokens, 1.0, 1)[0] if cost is not None else 0.0
    if rho_p >= 1.0:
        return math.inf
    link = runtime.kv_links.get((prefill.pool, decode.pool))
    move_s = 0.0
    if link is not None:
        nbytes = kv_bytes(int(group.prompt_tokens), prefill.kv_mb_per_token[group.kind])
        move_s = nominal_transfer_s(nbytes, link.bw_mbps, link.rtt_ms)
    up_s = _rtt_s(runtime, group, prefill) / 2.0
    down_s = _rtt_s(runtime, group, decode) / 2.0
    return up_s + prefill_s / (1.0 - rho_p) + move_s + down_s
