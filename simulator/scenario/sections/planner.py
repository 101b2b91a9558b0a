"""``planner``: the online planner's settings.

Refused where no planner runs, or where the scenario could not run one of
its candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies import registry
from simulator.planner.objective_names import FLOOR_OBJECTIVES, LEADING_OBJECTIVES
from simulator.scenario.model import Penalties, PlannerSpec
from simulator.scenario.planner_bounds import planner_size_issues
from simulator.scenario.sections.context import SCHEMA, BuildContext


def build_planner(ctx: BuildContext) -> PlannerSpec:
    """Build the planner settings; refuse them where no planner runs or it could not honour them."""
    raw = ctx.doc["planner"]
    candidates = raw["candidates"]
    if not raw["enabled"]:
        ctx.refuse_non_defaults(
            "planner",
            (
                "interval_s",
                "window_s",
                "model_load_s",
                "objectives",
                "candidates",
                "search",
                "analytic_keep",
                "penalties",
                "hysteresis",
                "min_requests",
                "slo_floor",
                "history_s",
                "replan_drift",
            ),
            "planner.enabled is false, so no planner runs",
        )
    else:
        _check_planner(ctx, raw)
    return PlannerSpec(
        bool(raw["enabled"]),
        float(raw["interval_s"]),
        float(raw["window_s"]),
        tuple(raw["objectives"]),
        {name: tuple(values) for name, values in candidates.items()},
        float(raw.get("model_load_s", 0.0)),
        str(raw["search"]),
        raw["analytic_keep"],
        Penalties(
            float(raw["penalties"]["energy_per_kj"]),
            float(raw["penalties"]["fairness_weight"]),
            str(raw["penalties"]["fairness_over"]),
        ),
        float(raw["hysteresis"]),
        int(raw["min_requests"]),
        float(raw["slo_floor"]),
        float(raw["window_s"] if raw["history_s"] is None else raw["history_s"]),
        float(raw["replan_drift"]),
    )


def _check_planner(ctx: BuildContext, raw: Mapping[str, Any]) -> None:
    """Refuse planner settings the online planner cannot honour."""
    candidates = raw["candidates"]
    if "model_load_s" not in raw:
        ctx.issue(
            "planner.model_load_s",
            None,
            "seconds a new replica takes to load its model (a property of the deployment)",
            "missing with planner.enabled: true",
        )
    if raw["history_s"] is not None and raw["history_s"] < raw["window_s"]:
        ctx.issue(
            "planner.history_s",
            raw["history_s"],
            f"null or at least planner.window_s ({raw['window_s']:g}): the busiest window_s"
            " of the last history_s seconds is replayed",
            "a history shorter than the window it fills",
        )
    objectives = raw["objectives"]
    if objectives[0] not in LEADING_OBJECTIVES or any(
        name in FLOOR_OBJECTIVES for name in objectives[1:]
    ):
        ctx.issue(
            "planner.objectives",
            objectives,
            "goodput, goodput_at_slo_floor or gpus_at_slo_floor first, then tie-breakers"
            " (p95_tpot, p95_ttft, p95_tvt, energy, cost)",
            "the first objective is not one of those, or a floor objective is not first",
        )
    penalties = raw["penalties"]
    if penalties["fairness_over"] != "origin" and penalties["fairness_weight"] == 0:
        ctx.issue(
            "planner.penalties.fairness_over",
            penalties["fairness_over"],
            "the default (origin) unless planner.penalties.fairness_weight is above 0",
            "fairness groups with no fairness penalty",
        )
    if raw["slo_floor"] > 0 and objectives[0] not in FLOOR_OBJECTIVES:
        ctx.issue(
            "planner.slo_floor",
            raw["slo_floor"],
            "0 unless the first objective is goodput_at_slo_floor or gpus_at_slo_floor",
            "an SLO floor no objective uses",
        )
    if len(set(raw["objectives"])) != len(raw["objectives"]):
        ctx.issue(
            "planner.objectives", raw["objectives"], "each objective once", "repeated objective"
        )
    if not candidates:
        ctx.issue(
            "planner.candidates",
            candidates,
            "at least one candidate list ("
            + ", ".join(SCHEMA["properties"]["planner"]["properties"]["candidates"]["properties"])
            + ")",
            "no candidate to choose from",
        )
    spec = ctx.doc["speculation"]
    _check_replica_candidates(ctx, candidates, spec["mode"])
    targets = [int(e["count"]) for e in ctx.doc["hardware_profiles"] if e["type"] == "target"]
    ctx.issues.extend(planner_size_issues(ctx.file, raw, targets))
    if "fused_fraction" in candidates and (
        spec["mode"] != "hybrid" or spec["hybrid"]["policy"] != "fused_fraction"
    ):
        ctx.issue(
            "planner.candidates.fused_fraction",
            candidates["fused_fraction"],
            "the key left out, or speculation.mode: hybrid with speculation.hybrid.policy: "
            "fused_fraction (the fraction it sets)",
            f"no fused fraction to set in mode {spec['mode']!r}",
        )
    if (
        raw["analytic_keep"] is not None
        and spec["mode"] == "hybrid"
        and spec["hybrid"]["policy"] != "fused_fraction"
    ):
        ctx.issue(
            "planner.analytic_keep",
            raw["analytic_keep"],
            "null, or speculation.hybrid.policy: fused_fraction (the estimate needs the share "
            "of requests served fused, which only that policy fixes)",
            f"no fused share to estimate with hybrid policy {spec['hybrid']['policy']!r}",
        )
    _check_planner_speculation(ctx, candidates)
    if ctx.doc["workload"].get("closed_loop") is not None:
        ctx.issue(
            "planner.enabled",
            True,
            "false with workload.closed_loop (what-if windows replay recent arrival times, "
            "which closed-loop users do not have)",
            "planner with a closed-loop workload",
        )


def _check_replica_candidates(ctx: BuildContext, candidates: Mapping[str, Any], mode: str) -> None:
    """Refuse draft replicas outside hybrid mode and a candidate without any replica."""
    draft = candidates.get("draft_replicas")
    verify = candidates.get("verify_replicas")
    if draft is not None and mode != "hybrid":
        ctx.issue(
            "planner.candidates.draft_replicas",
            draft,
            "the key left out, or speculation.mode: hybrid (draft replicas serve the "
            "requests the hybrid policy sends fused; in other modes the drafts run on "
            "the clients' devices or on every replica)",
            f"no server-side drafting to size in mode {mode!r}",
        )
    if verify is not None and 0 in verify and draft is None:
        ctx.issue(
            "planner.candidates.verify_replicas",
            verify,
            "at least 1 each (0 only with draft_replicas)",
            "a candidate with no replica",
        )
    if draft is not None and 0 in draft and verify is not None and 0 in verify:
        ctx.issue(
            "planner.candidates.draft_replicas",
            draft,
            "values whose sum with every verify_replicas value is at least 1 "
            "(0 in both lists makes a pool without replicas)",
            "a candidate (draft_replicas 0, verify_replicas 0) with no replica",
        )


def _check_planner_speculation(ctx: BuildContext, candidates: Mapping[str, Any]) -> None:
    """Refuse draft-length, microbatch and drafter-model candidates the scenario cannot run."""
    spec = ctx.doc["speculation"]
    mode = spec["mode"]
    for key in ("k", "k_controller"):
        if key in candidates and mode == "none":
            ctx.issue(
                f"planner.candidates.{key}",
                candidates[key],
                "the key left out in mode 'none' (nothing drafts)",
                "draft-length candidate without speculation",
            )
    if "k" in candidates and "k_controller" in candidates:
        ctx.issue(
            "planner.candidates.k_controller",
            candidates["k_controller"],
            "k or k_controller, not both (one decides the draft length: a k candidate "
            "sets the static controller)",
            "two candidate keys for the draft length",
        )
    adaptive = spec["adaptive_k"]
    low, high = max(1, int(adaptive["k_min"])), int(adaptive["k_max"])
    outside = [k for k in candidates.get("k", ()) if not low <= k <= high]
    if outside and mode != "none":
        ctx.issue(
            "planner.candidates.k",
            candidates["k"],
            f"draft lengths between {low} and speculation.adaptive_k.k_max ({high})",
            f"k outside the allowed range: {outside}",
        )
    names = registry("k_control").names()
    unknown = [name for name in candidates.get("k_controller", ()) if name not in names]
    if unknown and mode != "none":
        ctx.issue(
            "planner.candidates.k_controller",
            candidates["k_controller"],
            "registered k controllers: " + ", ".join(names),
            f"unknown k controller: {', '.join(unknown)}",
        )
    rule = ctx.doc["scheduler"]["arbitration"]["policy"]
    if "max_microbatch" in candidates and ctx.splits_rounds():
        ctx.issue(
            "planner.candidates.max_microbatch",
            candidates["max_microbatch"],
            f"the key left out with scheduler.arbitration.policy {rule} (a lane rule prices "
            "each iteration whole, never split into microbatches)",
            "microbatch candidates the lane rules do not run",
        )
    if "draft_model" in candidates:
        _check_planner_draft_models(ctx, candidates["draft_model"])


def _check_planner_draft_models(ctx: BuildContext, models: Sequence[str]) -> None:
    """Refuse drafter-model candidates no draft class with several models lists."""
    listed = ctx.multi_model_drafters()
    if not listed:
        ctx.issue(
            "planner.candidates.draft_model",
            list(models),
            "the key left out unless speculation.mode drafts on devices (distributed or "
            "hybrid) and a draft class lists several models under hardware_profiles[].model",
            "no drafter model to choose",
        )
        return
    unknown = [name for name in models if name not in listed]
    if unknown:
        ctx.issue(
            "planner.candidates.draft_model",
            list(models),
            "drafter models listed by a draft class with several models: " + ", ".join(listed),
            f"unknown or unlisted drafter model: {', '.join(unknown)}",
        )
