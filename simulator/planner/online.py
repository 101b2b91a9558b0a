"""The online goodput planner: what-if windows every ``interval_s``, the best applied.

At every multiple of ``planner.interval_s`` of simulated time (a clock
action with the priority of deliveries, scheduled after the events already
due at that instant), the planner:

1. samples the recent statistics: the arrivals of the last ``window_s``
   seconds (rate, mean prompt and output lengths) and the requests waiting
   and outstanding on the serving replicas, and forecasts the next
   ``window_s`` seconds (:mod:`simulator.planner.forecast`: the last
   ``window_s``, or the busiest ``window_s`` of the last ``history_s``);
   unless :mod:`simulator.planner.trigger` finds the load moved (or the last
   estimate missed) since the last round that ran windows, the round keeps
   the configuration without windows;
2. runs one what-if window per candidate (:mod:`simulator.planner.candidates`)
   from the run's current state: a fresh engine with the candidate's runtime,
   the run's unfinished requests (:meth:`Engine.snapshot`: they keep their
   arrival, first-token times and counters; the candidate has the first
   ``n`` replicas of each pool, so requests of the others migrate) and the
   forecast arrivals replayed from now, run until every one
   of these requests has ended (at most ``WINDOW_CAP * window_s``). A replica the candidate
   adds takes work only after ``model_load_s`` (one the run is loading,
   from when it is ready). Its random streams come from the run's seed and
   the window's index, so the same seed gives the same decisions;
   With ``search: hill_climb`` the candidates of a round are only the
   current configuration and its neighbours (one step down or up the list of
   each key, from the values nearest the run's at first);
3. windows the current configuration too (added after the candidates when
   none of them is it; its window keeps each pool's replicas as they are);
4. scores each window (:mod:`simulator.planner.objectives`), finds the best
   by the objectives in order (ties: the earlier candidate) and applies it
   only where :mod:`simulator.planner.decision` finds a reason to change:
   it beats the current configuration's window by more than
   ``planner.hysteresis`` in the first objective, after the change's cost.
   It applies through the candidate keys' knobs
   (:mod:`simulator.planner.knobs`; the replica counts through
   :func:`~simulator.planner.candidates.apply_replicas`).

A round that keeps the configuration when nothing but observers (the
sampler, the stop at ``until_s``) is left on the clock plans no next round:
the run has stalled and ends as it would without a planner. A round whose
window would hold no request keeps the configuration; one
with fewer than ``planner.min_requests`` (the run's unfinished ones plus
the arrivals replayed) windows only the candidates holding no more GPUs
than the current configuration: a near-empty window may shrink the run,
never grow it. Every round's
log rows say its ``decision`` (``kept`` or ``changed``) and ``reason``.

With ``analytic_keep: M`` only the ``M`` candidates that the analytic
estimate (:mod:`simulator.planner.analytic`; with prefill and decode pools
:mod:`simulator.planner.analytic_split`) ranks best get a window
(and the current configuration). Windows
run on the injected :class:`~simulator.planner.windows.WindowRunner` (default:
in the run's process, one after another); each window's index and seed are
fixed before any runs, so the executor does not change a decision.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from simulator.engine.clock import call_at, only_observers_pending
from simulator.engine.core import Engine
from simulator.engine.records import InFlight
from simulator.planner.analytic import Estimate, estimate
from simulator.planner.analytic_split import estimate_split, is_disaggregated
from simulator.planner.candidates import (
    Candidate,
    apply_replicas,
    candidate_keys,
    candidate_runtime,
    enumerate_candidates,
    make_candidate,
    nearest_index,
    neighbours,
    pool_roles,
    pools_of,
    reloaded_pools,
    replica_counts,
    sets_roles,
    window_ready_times,
)
from simulator.planner.decision import Decision, decide, gain
from simulator.planner.forecast import forecast, load_of
from simulator.planner.knobs import KNOBS
from simulator.planner.objectives import WindowScore, meets_slos
from simulator.planner.trigger import Windowed, replan_reason
from simulator.planner.windows import SerialWindows, WindowRunner, WindowTask
from simulator.scenario.model import PlannerSpec
from simulator.workload import RequestTable

WINDOW_CAP = 4
"""A what-if window stops at ``WINDOW_CAP * window_s`` even if requests are left
(a configuration that cannot drain its backlog by then scores them as missed)."""


def window_seed(seed: int, index: int) -> int:
    """The seed of what-if window ``index`` of a run seeded ``seed``."""
    return int(np.random.SeedSequence(entropy=seed, spawn_key=(index,)).generate_state(1)[0])


class OnlinePlanner:
    """The planner hook of one run (see the module docstring).

    Args:
        spec: The scenario's planner settings (enabled).
        seed: The run's seed.
        windows: Where the windows run (``None``: in the run's process).
    """

    def __init__(self, spec: PlannerSpec, seed: int, windows: WindowRunner | None = None) -> None:
        self.spec = spec
        self.seed = seed
        self.windows: WindowRunner = windows if windows is not None else SerialWindows()
        """Where windows run (default: one after another in the run's process)."""
        self.candidates = enumerate_candidates(spec.candidates)
        """Every candidate (what a grid search evaluates each round)."""
        self._position: dict[str, int] | None = None
        """Hill climbing: the index of the applied value of each key."""
        self._rows: list[dict[str, Any]] = []
        self._windows = 0
        self._engine: Engine | None = None
        self._start_s = 0.0
        self._windowed_last: Windowed | None = None
        """The last round that ran windows (the re-plan trigger's reference)."""

    def start(self, engine: Engine) -> None:
        """Schedule the first round at ``interval_s`` after the run's start."""
        self._engine = engine
        self._start_s = engine.env.now
        self._schedule(engine.env.now + self.spec.interval_s)

    def rounds(self) -> tuple[dict[str, Any], ...]:
        """The decisions so far: one row per candidate per round."""
        return tuple(self._rows)

    def _schedule(self, at_s: float) -> None:
        engine = self._engine
        assert engine is not None
        call_at(engine.env, at_s, partial(self._round, at_s), observer=True)

    def _next(self, at_s: float, changed: bool) -> None:
        """Plan the next round, unless the run has stalled.

        A round that kept the configuration while nothing but the sampler is
        left on the clock would be followed by the same round for ever (the
        run would never end): the run ends there as it would without a
        planner, reported stalled.
        """
        engine = self._engine
        assert engine is not None
        if not changed and only_observers_pending(engine.env):
            return
        self._schedule(at_s + self.spec.interval_s)

    def _round(self, at_s: float) -> None:
        """One round: window the candidates and the current configuration, decide, plan the next."""
        engine = self._engine
        assert engine is not None
        if engine.pending_arrivals() == 0 and engine.outstanding() == 0:
            return  # nothing left to plan for: the run ends with its last request
        recent = self._recent_arrivals(engine, at_s)
        spec = self.spec
        stats = {
            **self._statistics(engine, at_s),
            "forecast_arrival_rate_per_s": len(recent) / spec.window_s,
        }
        in_flight = engine.snapshot()
        positions: list[dict[str, int]] = []
        if self.spec.search == "hill_climb":
            positions = neighbours(self.spec.candidates, self._current_position(engine))
            candidates = [make_candidate(self.spec.candidates, p) for p in positions]
        else:
            candidates = list(self.candidates)
        now = self._current_candidate(engine)
        if now not in candidates:
            candidates.append(now)
        here = candidates.index(now)
        requests = len(recent) + len(in_flight)
        if requests == 0:
            self._keep(at_s, {**stats, "replan": ""}, candidates, here, "empty window")
            return
        few = (
            f"{requests} request{'s' * (requests > 1)} in the window, fewer than"
            f" {spec.min_requests}: no candidate with more GPUs; "
            if requests < spec.min_requests
            else ""
        )
        load = load_of(recent, len(in_flight))
        replan, why = replan_reason(
            self.spec.replan_drift,
            self._windowed_last,
            load,
            stats["recent_completed"],
            stats["recent_slo_attainment"],
            self.spec.min_requests,
        )
        stats = {**stats, "replan": why}
        if not replan:
            self._keep(at_s, stats, candidates, here, why)
            return
        tasks = [
            self._task(engine, c, recent, in_flight, at_s, i == here)
            for i, c in enumerate(candidates)
        ]
        if few:
            analytic: list[Estimate] = []
            windowed = [i for i, task in enumerate(tasks) if _gpus(task) <= _gpus(tasks[here])]
        else:
            analytic = self._prefilter(engine, tasks, recent)
            windowed = sorted({*self._windowed(len(tasks), analytic), here})
        for i in windowed:
            tasks[i] = replace(tasks[i], index=i, seed=window_seed(self.seed, self._windows))
            self._windows += 1
        scores = dict(zip(windowed, self.windows.run([tasks[i] for i in windowed]), strict=True))
        if few:
            best, decision = self._shrink(tasks, scores, here)
        else:
            best = min(
                windowed,
                key=lambda i: (scores[i].rank(spec.objectives, spec.penalties, spec.slo_floor), i),
            )
            if best == here:
                decision = Decision(False, "current configuration best")
            else:
                added = _loading_gpus(engine, candidates[best], tasks[best], tasks[here])
                decision = decide(spec, scores[best], scores[here], added)
        decision = replace(decision, reason=few + decision.reason)
        applied = best if decision.change else here
        self._windowed_last = Windowed(
            at_s, load, scores[applied].slo_attainment, bool(positions) and decision.change
        )
        if positions and decision.change:
            self._position = positions[best]
        self._log(at_s, stats, candidates, here, scores, tasks, applied, decision, analytic)
        if decision.change:
            self._apply(engine, candidates[best])
        self._next(at_s, decision.change)

    def _keep(
        self,
        at_s: float,
        stats: dict[str, Any],
        candidates: list[Candidate],
        here: int,
        reason: str,
    ) -> None:
        """End a round that runs no window: log it as kept, plan the next."""
        self._log(at_s, stats, candidates, here, {}, [], here, Decision(False, reason))
        self._next(at_s, False)

    def _shrink(
        self, tasks: list[WindowTask], scores: dict[int, WindowScore], here: int
    ) -> tuple[int, Decision]:
        """A round with few requests: the fewest GPUs whose window is no worse than the current's.

        Its windows are too small to rank candidates by a few requests more or
        less; what they can show is that a smaller configuration loses nothing
        in the first objective, and then it frees the GPUs (ties: the earlier
        candidate).
        """
        spec = self.spec
        fit = [i for i in scores if i == here or gain(spec, scores[i], scores[here])[0] >= 0]
        best = min(fit, key=lambda i: (_gpus(tasks[i]), i))
        if _gpus(tasks[best]) == _gpus(tasks[here]):
            return here, Decision(False, "no configuration with fewer GPUs as good")
        name = gain(spec, scores[best], scores[here])[1]
        return best, Decision(True, f"fewest GPUs no worse in {name}")

    def _log(
        self,
        at_s: float,
        stats: dict[str, Any],
        candidates: list[Candidate],
        here: int,
        scores: dict[int, WindowScore],
        tasks: list[WindowTask],
        applied: int,
        decision: Decision,
        analytic: list[Estimate] | None = None,
    ) -> None:
        """One log row per candidate of the round (see :mod:`simulator.planner.log`)."""
        objectives = self.spec.objectives
        penalties = self.spec.penalties
        for i, candidate in enumerate(candidates):
            row: dict[str, Any] = {"time_s": at_s, "candidate": candidate.key, **stats}
            score = scores.get(i)
            for name in objectives:
                row[f"est_{name}"] = getattr(score, name) if score is not None else math.nan
            row["est_good"] = score.good if score is not None else math.nan
            row["est_slo_attainment"] = score.slo_attainment if score is not None else math.nan
            if penalties:
                row["est_penalised_goodput"] = (
                    score.penalised_goodput(penalties) if score is not None else math.nan
                )
            if analytic:
                row["analytic_goodput"] = analytic[i].goodput
                row["windowed"] = score is not None
            row["migrated"] = _migrated(tasks[i]) if tasks else 0
            row["current"] = i == here
            row["chosen"] = i == applied
            row["decision"] = "changed" if decision.change else "kept"
            row["reason"] = decision.reason
            self._rows.append(row)

    def _current_candidate(self, engine: Engine) -> Candidate:
        """The run's configuration now, as a candidate of the planner's keys.

        A key whose knob has no value to state now (``draft_model`` under a
        policy other than ``fixed``: "") is left out, so its window leaves it
        as the run has it.
        """
        keys = candidate_keys(self.spec.candidates)
        values = ((key, KNOBS[key].current(engine)) for key in keys)
        return Candidate(tuple((key, value) for key, value in values if value != ""))

    def _prefilter(
        self, engine: Engine, tasks: list[WindowTask], recent: RequestTable
    ) -> list[Estimate]:
        """Every task's analytic estimate, when ``analytic_keep`` leaves some without a window."""
        keep = self.spec.analytic_keep
        if keep is None or len(tasks) <= keep:
            return []
        share = self.fused_share(engine)
        rule = estimate_split if is_disaggregated(engine.runtime) else estimate
        return [rule(task.runtime, recent, self.spec.window_s, share) for task in tasks]

    def _windowed(self, count: int, analytic: list[Estimate]) -> list[int]:
        """The tasks that get a window, in candidate order: all, or the best ``analytic_keep``."""
        if not analytic:
            return list(range(count))
        ranked = sorted(range(len(analytic)), key=lambda i: (analytic[i].rank(), i))
        return sorted(ranked[: self.spec.analytic_keep])

    def _current_position(self, engine: Engine) -> dict[str, int]:
        """Where hill climbing stands: the last choice, or at first the values nearest the run's."""
        if self._position is not None:
            return self._position
        values = self.spec.candidates
        return {
            key: nearest_index(values[key], KNOBS[key].current(engine))
            for key in candidate_keys(values)
        }

    def _statistics(self, engine: Engine, at_s: float) -> dict[str, Any]:
        """What the round saw of the run over the last ``window_s`` (the log's context columns).

        Arrivals: their rate and mean prompt and output lengths. Completions:
        their number, the share meeting every SLO of their class and the
        accepted share of their drafted tokens. Now: the requests queued on
        the serving replicas, those arrived and not ended, the serving
        replicas per pool.
        """
        since_s = max(self._start_s, at_s - self.spec.window_s)
        span_s = at_s - since_s
        arrived = engine.requests.window(since_s, at_s, rebase=False)
        done = engine.completed_since(since_s)
        drafted = sum(r.drafted_tokens for r in done)
        return {
            "recent_arrival_rate_per_s": len(arrived) / span_s if span_s > 0 else math.nan,
            "recent_prompt_tokens": _mean(arrived.prompt_tokens),
            "recent_output_tokens": _mean(arrived.output_tokens),
            "recent_completed": len(done),
            "recent_slo_attainment": (
                sum(meets_slos(r, engine.requests) for r in done) / len(done) if done else math.nan
            ),
            "recent_acceptance": (
                sum(r.accepted_tokens for r in done) / drafted if drafted else math.nan
            ),
            "waiting": engine.waiting(),
            "outstanding": engine.outstanding(),
            "serving": " ".join(f"{p}={n}" for p, n in engine.serving_counts().items()),
        }

    def _recent_arrivals(self, engine: Engine, at_s: float) -> RequestTable:
        """The arrivals a window replays from ``at_s`` on (:func:`~simulator.planner.forecast.forecast`)."""
        spec = self.spec
        return forecast(engine.requests, at_s, self._start_s, spec.window_s, spec.history_s)

    def _task(
        self,
        engine: Engine,
        candidate: Candidate,
        recent: RequestTable,
        in_flight: tuple[InFlight, ...],
        at_s: float,
        current: bool = False,
    ) -> WindowTask:
        """The candidate's what-if window from ``at_s`` (index and seed set when it runs).

        The current configuration's window keeps each pool's replicas as they
        are (and, before any draft/verify split, their roles).
        """
        runtime = engine.runtime
        if current:
            counts = engine.serving_counts()
            if _unsplit(engine):
                kept = tuple((k, v) for k, v in candidate.values if k != "draft_replicas")
                candidate = Candidate(kept)
        else:
            counts = replica_counts(
                candidate,
                engine.serving_counts(),
                engine.role_counts("verify"),
                pool_roles(runtime),
            )
        ready = window_ready_times(engine, candidate, counts, self.spec.model_load_s)
        reloaded = reloaded_pools(engine, candidate)
        return WindowTask(
            index=-1,
            runtime=candidate_runtime(runtime, candidate, counts, ready),
            requests=recent,
            in_flight=_remap(in_flight, engine, counts, pools_of(runtime), reloaded),
            seed=0,
            start_s=at_s,
            until_s=at_s + WINDOW_CAP * self.spec.window_s,
        )

    @staticmethod
    def fused_share(engine: Engine) -> float:
        """The share of new requests served fused (mode hybrid, ``fused_fraction`` policy)."""
        hybrid = engine.hybrid_choice
        return float(getattr(hybrid.params, "fraction", 0.0)) if hybrid is not None else 0.0

    def _apply(self, engine: Engine, candidate: Candidate) -> None:
        """Make the run's configuration the candidate's from now on."""
        apply_replicas(engine, candidate, self.spec.model_load_s)
        for name, value in candidate.values:
            KNOBS[name].apply(engine, value, self.spec.model_load_s)


def _gpus(task: WindowTask) -> int:
    """GPUs of a window's replicas."""
    return sum(plan.gpus for plan in task.runtime.replicas)


def _loading_gpus(
    engine: Engine, candidate: Candidate, task: WindowTask, current: WindowTask
) -> int:
    """GPUs a change to ``candidate`` starts loading.

    Every GPU of a pool it reloads at another tensor-parallel degree; for
    a disaggregated split, the GPUs of the replicas it starts in each pool;
    otherwise the GPUs it adds (at least 0).
    """
    reloaded = reloaded_pools(engine, candidate)
    if reloaded:
        return sum(plan.gpus for plan in task.runtime.replicas if plan.pool in reloaded)
    if sets_roles(candidate):
        return _started_gpus(task, current)
    return max(_gpus(task) - _gpus(current), 0)


def _started_gpus(task: WindowTask, current: WindowTask) -> int:
    """GPUs of the replicas a change starts: the GPUs each pool gains.

    A re-split starts replicas in one pool while another drains, so the
    net change would miss them.
    """
    mine: dict[str, int] = {}
    for plan in task.runtime.replicas:
        mine[plan.pool] = mine.get(plan.pool, 0) + plan.gpus
    for plan in current.runtime.replicas:
        mine[plan.pool] = mine.get(plan.pool, 0) - plan.gpus
    return sum(max(gpus, 0) for gpus in mine.values())


def _migrated(task: WindowTask) -> int:
    """Requests the window moves off replicas its candidate lacks."""
    total = len(task.runtime.replicas)
    return sum(1 for item in task.in_flight if item.replica >= total)


def _unsplit(engine: Engine) -> bool:
    """Whether some active replica still serves both roles (no draft/verify split yet)."""
    return any(
        replica.role == "both"
        for pool in engine.serving_counts()
        for replica in engine.active_replicas(pool)
    )


def _mean(values: Any) -> float:
    """Mean of an array (nan when empty)."""
    return float(np.mean(values)) if len(values) else math.nan


def _remap(
    in_flight: tuple[InFlight, ...],
    engine: Engine,
    counts: dict[str, int],
    pools: list[str],
    reloaded: set[str] | None = None,
) -> tuple[InFlight, ...]:
    """Renumber the requests' replicas for a window with ``counts`` replicas per pool.

    The ``i``-th active (serving or loading) replica of a pool in the run is
    the ``i``-th of the candidate; a request on a replica the candidate lacks
    (beyond its count, or draining, or in a pool ``reloaded`` at another
    tensor-parallel degree) gets an index past the window's replicas, so
    the window migrates it. The prefill replica holding a disaggregated
    request's KV (``kv_from``) is renumbered alike.
    """
    total = sum(counts[pool] for pool in pools)
    slot: dict[int, int] = {}
    offset = 0
    for pool in pools:
        kept = 0 if reloaded and pool in reloaded else counts[pool]
        for i, replica in enumerate(engine.active_replicas(pool)[:kept]):
            slot[replica.index] = offset + i
        offset += counts[pool]
    return tuple(
        item
        if item.replica < 0
        else replace(item, replica=slot.get(item.replica, total))
        if item.kv_from < 0
        else replace(
            item, replica=slot.get(item.replica, total), kv_from=slot.get(item.kv_from, total)
        )
        for item in in_flight
    )
