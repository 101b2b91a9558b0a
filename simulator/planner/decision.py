"""Whether a planning round changes the run's configuration, and why.

Every round windows the current configuration beside the candidates. The
best window by the objectives is applied only when it is another
configuration and its gain over the current one's window exceeds
``planner.hysteresis``, after the change's cost:

- What the candidate's window already counts: the GPUs of the replicas it
  adds, from the decision (they load for ``model_load_s`` holding their
  GPUs, so the window's GPU-seconds include them while they serve
  nothing), and the requests on the replicas it removes (they migrate: they
  are queued again on the candidate's replicas and their SLOs are judged
  with the delay).
- What is added here: the loading the window does not see. A window ends
  when its last request does; where that is before the added replicas are
  loaded, their GPUs x the load time left after the window are added to
  the candidate's GPU-seconds (its goodput is recomputed with them).

The gain is relative, in the first objective: goodput (or, for the floor
objectives, first whether the floor is met, then the attainment below it,
then, at equal attainment or both meeting it, goodput or GPUs). A better rank in a tie-breaker alone is no gain.
Rounds with fewer than ``planner.min_requests`` requests (the run's
unfinished ones plus the arrivals replayed) weigh only candidates holding
no more GPUs than the current configuration (none: no window, kept).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simulator.planner.objective_names import FLOOR_OBJECTIVES
from simulator.planner.objectives import WindowScore
from simulator.scenario.model import PlannerSpec


@dataclass(frozen=True)
class Decision:
    """A round's decision.

    Attributes:
        change: Whether the best candidate is applied.
        reason: Why (the planner log's ``reason``).
    """

    change: bool
    reason: str


def with_load_cost(score: WindowScore, extra_gpu_s: float) -> WindowScore:
    """The score with ``extra_gpu_s`` GPU-seconds more held (its goodput recomputed)."""
    if extra_gpu_s <= 0:
        return score
    gpu_s = score.gpu_s + extra_gpu_s
    return replace(score, gpu_s=gpu_s, goodput=score.good / gpu_s)


def unseen_load_gpu_s(score: WindowScore, gpus_added: int, model_load_s: float) -> float:
    """GPU-seconds of loading the window of a candidate adding ``gpus_added`` GPUs does not see."""
    return max(gpus_added, 0) * max(model_load_s - score.span_s, 0.0)


def _relative(better: float, worse: float) -> float:
    """Relative gain of ``better`` over ``worse`` (a positive from 0: infinite)."""
    if math.isnan(better) or math.isnan(worse):
        return 0.0
    if worse <= 0:
        return math.inf if better > worse else 0.0
    return (better - worse) / worse


def gain(spec: PlannerSpec, best: WindowScore, current: WindowScore) -> tuple[float, str]:
    """The relative gain of ``best`` over ``current`` in the first objective, and its name."""
    first = spec.objectives[0]
    penalties = spec.penalties
    if first in FLOOR_OBJECTIVES:
        floor = spec.slo_floor
        if best.meets_floor(floor) and not current.meets_floor(floor):
            return math.inf, "SLO floor met"
        if not best.meets_floor(floor) and best.slo_attainment != current.slo_attainment:
            return _relative(best.slo_attainment, current.slo_attainment), "SLO attainment"
        if first == "gpus_at_slo_floor":
            fewer = (current.gpus - best.gpus) / current.gpus if current.gpus else 0.0
            return fewer, "GPUs"
    return _relative(best.value("goodput", penalties), current.value("goodput", penalties)), (
        "goodput"
    )


def decide(
    spec: PlannerSpec,
    best: WindowScore,
    current: WindowScore,
    gpus_added: int,
) -> Decision:
    """Whether to apply ``best`` (another configuration than ``current``'s), and why."""
    cost_gpu_s = unseen_load_gpu_s(best, gpus_added, spec.model_load_s)
    value, name = gain(spec, with_load_cost(best, cost_gpu_s), current)
    cost = f" after {cost_gpu_s:g} GPU-s of loading after the window" if cost_gpu_s else ""
    threshold = f"hysteresis {spec.hysteresis * 100:g} %"
    if value > spec.hysteresis:
        amount = "" if math.isinf(value) else f" +{value * 100:.1f} %"
        return Decision(True, f"best by {name}{amount}{cost}")
    return Decision(False, f"gain {value * 100:.1f} % in {name}{cost} not above {threshold}")
