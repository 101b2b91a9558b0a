"""``scheduler``: lanes, routing, admission, arbitration, drafter selection, the KV guard."""

from __future__ import annotations

from dataclasses import replace

from policies.batching import BatchLimits
from simulator.scenario.model import (
    DeviceClass,
    LaneSpec,
    LanesSpec,
    MicrobatchSpec,
    PolicyChoice,
    SchedulerSpec,
)
from simulator.scenario.sections.context import PHASES_BY_MODE, BuildContext
from simulator.scenario.sections.policy_choice import build_policy


def check_kv_guard(ctx: BuildContext, classes: list[DeviceClass]) -> None:
    """Refuse a KV guard that could never act, and spills with no fused model to go to."""
    sched = ctx.doc["scheduler"]
    mode = ctx.doc["speculation"]["mode"]
    if sched["verify"]["policy"] == "kv_aware_edf" and mode not in ("distributed", "hybrid"):
        ctx.issue(
            "scheduler.verify.policy",
            "kv_aware_edf",
            f"edf: mode {mode!r} runs no verify steps, the only work kv_aware_edf guards",
            "KV guard without verify steps",
        )
        return
    if sched["verify"]["policy"] == "kv_aware_edf" and sched["kv"]["on_full"] == "queue":
        ctx.issue(
            "scheduler.verify.policy",
            "kv_aware_edf",
            "edf with scheduler.kv.on_full queue (which reserves every request's KV, drafts "
            "included, at prefill, so a verify step adds none), or kv_aware_edf with "
            "scheduler.kv.on_full preempt_recompute",
            "KV guard that never holds anything back",
        )
        return
    if not ctx.spills_to_fused():
        return
    key = "scheduler.verify.params.on_kv_short"
    for device in classes:
        if device.type == "target" and device.fused_model is None:
            ctx.issue(
                key,
                "spill_fused",
                "delay, or a fused model declared under speculation.fused_models for "
                f"target pool {device.id}",
                "spill to fused mode on a replica with no fused model",
            )


def _policy(ctx: BuildContext, family: str, name: str) -> PolicyChoice:
    """The ``family`` policy chosen under ``scheduler.<name>`` (its ``policy`` and ``params``)."""
    raw = ctx.doc["scheduler"][name]
    return build_policy(ctx, family, raw["policy"], raw["params"], f"scheduler.{name}")


def _lane(ctx: BuildContext, name: str, family: str) -> LaneSpec:
    raw = ctx.doc["scheduler"][name]
    batching = raw["batching"]
    lane = LaneSpec(
        policy=_policy(ctx, family, name),
        limits=BatchLimits(
            int(batching["max_batch"]), float(batching["max_wait_ms"]), batching["max_tokens"]
        ),
    )
    if "microbatch" not in raw:  # only the verify lane has microbatch settings
        return lane
    micro = raw["microbatch"]
    if micro["fallback"] != "per_request" and micro["max_context_ratio"] != 2.0:
        ctx.issue(
            f"scheduler.{name}.microbatch.max_context_ratio",
            micro["max_context_ratio"],
            "the default (2.0) unless microbatch.fallback is per_request",
            "context ratio that only the per_request fallback uses",
        )
    return replace(
        lane,
        microbatch=MicrobatchSpec(
            int(micro["max_microbatch"]),
            micro["fallback"],
            float(micro["max_context_ratio"]),
        ),
    )


def _draft_selection(ctx: BuildContext) -> PolicyChoice:
    """``scheduler.draft.model_selection``: refused unless a draft class lists several models."""
    raw = ctx.doc["scheduler"]["draft"]["model_selection"]
    mode = ctx.doc["speculation"]["mode"]
    if "drafter" in PHASES_BY_MODE[mode] and not any(
        e["type"] == "draft" and isinstance(e["model"], list) and len(e["model"]) > 1
        for e in ctx.doc["hardware_profiles"]
    ):
        ctx.refuse_non_defaults(
            "scheduler.draft",
            ("model_selection",),
            "every draft class runs one drafter model (list several under "
            "hardware_profiles[].model for a policy to choose among)",
        )
    choice = build_policy(
        ctx, "draft_selection", raw["policy"], raw["params"], "scheduler.draft.model_selection"
    )
    model = getattr(choice.params, "model", None)
    listed = ctx.multi_model_drafters()
    if raw["policy"] == "fixed" and model is not None and listed and model not in listed:
        ctx.issue(
            "scheduler.draft.model_selection.params.model",
            model,
            "a drafter model listed by a draft class with several models: " + ", ".join(listed),
            "model no draft class chooses among",
        )
    return choice


def build_scheduler(ctx: BuildContext, lanes: LanesSpec) -> SchedulerSpec:
    """Build the lanes and policies; refuse batching the arbitration rule or mode does not use."""
    sched = ctx.doc["scheduler"]
    if sched["arbitration"]["policy"] == "chunked_prefill":
        if sched["prefill"]["policy"] != "fcfs":
            ctx.issue(
                "scheduler.prefill.policy",
                sched["prefill"]["policy"],
                "fcfs with chunked_prefill (prompts join each iteration's token budget in "
                "arrival order; no prefill batch is formed for a policy to time)",
                "prefill batching policy that chunked prefill does not use",
            )
        prefill = sched["prefill"]["batching"]
        for key, default in (("max_wait_ms", 0), ("max_tokens", None)):
            if prefill[key] != default:
                ctx.issue(
                    f"scheduler.prefill.batching.{key}",
                    prefill[key],
                    f"{default if default is not None else 'null'} with chunked_prefill "
                    "(its token_budget bounds every iteration; prompts never wait for a batch)",
                    "prefill batching limit that chunked prefill does not use",
                )
    wait_ms = sched["verify"]["batching"]["max_wait_ms"]
    mode = ctx.doc["speculation"]["mode"]
    if wait_ms > 0 and mode in ("none", "fused"):
        ctx.issue(
            "scheduler.verify.batching.max_wait_ms",
            wait_ms,
            "0 in mode " + repr(mode) + " (it holds back verify bundles arriving from "
            "client devices, in modes distributed and hybrid)",
            "decode-lane requests never wait for a batch: each is ready again when its "
            "own iteration ends",
        )
    if "drafter" not in PHASES_BY_MODE[mode]:
        reason = f"no client device drafts in mode {mode!r}"
        ctx.refuse_non_defaults("scheduler.draft", (), reason)
        ctx.refuse_non_defaults("network.payload", ("bytes_per_draft_token",), reason)
    return SchedulerSpec(
        prefill=_lane(ctx, "prefill", "prefill_batching"),
        draft=_lane(ctx, "draft", "draft_scheduling"),
        verify=_lane(ctx, "verify", "verify_batching"),
        routing=_policy(ctx, "routing", "routing"),
        admission=_policy(ctx, "admission", "admission_control"),
        kv_on_full=sched["kv"]["on_full"],
        max_running_requests=int(sched["max_running_requests"]),
        arbitration=_policy(ctx, "arbitration", "arbitration"),
        draft_selection=_draft_selection(ctx),
        lanes=lanes,
    )
