"""``scheduler.lanes``: the split-round settings of a lane arbitration rule.

Refused unless a lane rule runs fused rounds; checks the overlap settings
and loads the LUTs that price the drafter and verifier lanes.
"""

from __future__ import annotations

from pathlib import Path

from simulator.loading import resolve_path
from simulator.lut import LutManager, LutTable, load_lut
from simulator.scenario.model import DeviceClass, LaneModel, LanesSpec, lane_lut_key
from simulator.scenario.sections.context import SCHEMA, BuildContext


def build_lanes(
    ctx: BuildContext, classes: list[DeviceClass], luts: dict[Path, LutTable | None]
) -> LanesSpec:
    """``scheduler.lanes``: refuse settings the arbitration rule does not use; load its LUTs."""
    raw = ctx.doc["scheduler"]["lanes"]
    sched = ctx.doc["scheduler"]
    rule = sched["arbitration"]["policy"]
    mode = ctx.doc["speculation"]["mode"]
    key = "scheduler.lanes"
    if not ctx.splits_rounds():
        ctx.refuse_non_defaults(
            key,
            (),
            f"scheduler.arbitration.policy {rule} runs whole rounds; scheduler.lanes is read "
            "by the lane rules (baseline, pd, pdv, pdv_hybrid, pdv_unified), which split "
            "fused rounds",
        )
        return LanesSpec()
    if mode != "fused":
        ctx.issue(
            "scheduler.arbitration.policy",
            rule,
            f"prefill_first or chunked_prefill in mode {mode!r} (lane rules split fused "
            "rounds: mode fused)",
            "lane rule without fused rounds",
        )
        return LanesSpec()
    if sched["kv"]["on_full"] != "queue" and raw["gpu_sharing"] == "overlap":
        ctx.issue(
            "scheduler.kv.on_full",
            sched["kv"]["on_full"],
            f"queue with scheduler.arbitration.policy {rule} and scheduler.lanes.gpu_sharing "
            "overlap (recompute preemption is modelled for one iteration at a time: "
            "gpu_sharing serialized)",
            "KV rule the overlapping lanes do not run",
        )
    micro_schema = SCHEMA["properties"]["scheduler"]["properties"]["verify"]["properties"][
        "microbatch"
    ]["properties"]
    micro = sched["verify"]["microbatch"]
    if any(
        micro.get(key, spec["default"]) != spec["default"] for key, spec in micro_schema.items()
    ):
        ctx.issue(
            "scheduler.verify.microbatch",
            micro,
            f"the defaults with scheduler.arbitration.policy {rule} (a lane iteration is "
            "priced whole, at its mean context and largest k)",
            "microbatch split the lane rules do not run",
        )
    overlap = raw["gpu_sharing"] == "overlap"
    if not overlap and raw["overlap_efficiency"] is not None:
        ctx.issue(
            f"{key}.overlap_efficiency",
            raw["overlap_efficiency"],
            "null (the default) with gpu_sharing serialized (iterations never overlap)",
            "setting that would have no effect",
        )
    if overlap and rule == "pdv_unified":
        ctx.issue(
            f"{key}.gpu_sharing",
            "overlap",
            "serialized with pdv_unified (its one worker runs one iteration at a time)",
            "overlap with nothing to overlap",
        )
    if overlap:
        for device in classes:
            if device.type == "target" and device.profile.compute.thermal is not None:
                ctx.issue(
                    f"{key}.gpu_sharing",
                    "overlap",
                    f"serialized: target pool {device.id} throttles (profile "
                    f"{device.profile.id}), and throttling is modelled for one iteration "
                    "at a time",
                    "overlap on a throttling replica",
                )
    models: dict[str, LaneModel | None] = {}
    for role, phase in (("drafter", "draft_decode"), ("verifier", "verify")):
        entry = raw[role]
        if entry is None:
            ctx.issue(
                f"{key}.{role}",
                None,
                f"{{lut: ..., model: ...}} naming the LUT with the {phase} rows of the "
                f"fused model's {'draft' if role == 'drafter' else 'target'} model",
                f"lane rule {rule} needs the split costs of a round",
            )
            models[role] = None
            continue
        path = resolve_path(ctx.base_dir, entry["lut"])
        if path not in luts:
            luts[path] = ctx.load_file(f"{key}.{role}.lut", entry["lut"], load_lut, "LUT")
        model = LaneModel(entry["model"], path, entry.get("dtype", "fp16"))
        models[role] = model
        table = luts[path]
        if table is None:
            continue
        have = LutManager([table])
        for device in classes:
            if device.type != "target" or device.fused_model is None:
                continue
            lut_key = lane_lut_key(model, device, phase)
            if not have.has(lut_key):
                ctx.issue(
                    f"{key}.{role}",
                    entry,
                    f"a LUT with {phase} rows of model {model.model_id} on "
                    f"{lut_key.hardware} at tensor parallel {lut_key.tensor_parallel}, "
                    f"dtype {model.dtype} (target pool {device.id})",
                    "LUT without the rows the split rounds need",
                )
    return LanesSpec(
        split_rounds=True,
        gpu_sharing=raw["gpu_sharing"],
        overlap_efficiency=raw["overlap_efficiency"],
        host_overhead_ms=float(raw["host_overhead_ms"]),
        drafter=models["drafter"],
        verifier=models["verifier"],
    )
