"""``speculation`` model lists and ``acceptance_models``: the models a run uses.

Loads the acceptance curves and the models' LUTs, checks each model is of a
kind the mode runs, and that every device running a model finds its LUT rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from simulator.acceptance import load_acceptance_model
from simulator.loading import resolve_path
from simulator.lut import LutKey, LutTable, load_lut
from simulator.scenario.model import AcceptanceCurve, DeviceClass, ModelSpec
from simulator.scenario.sections.context import MODEL_LISTS, BuildContext


def load_acceptance(ctx: BuildContext) -> dict[str, AcceptanceCurve]:
    """Load ``speculation.acceptance_models`` by name (a curve that failed to load is left out)."""
    curves: dict[str, AcceptanceCurve] = {}
    for index, raw in enumerate(ctx.doc["speculation"]["acceptance_models"]):
        key = f"speculation.acceptance_models[{index}]"
        if raw["name"] in curves:
            ctx.issue(f"{key}.name", raw["name"], "unique names", "duplicate acceptance model")
            continue
        model = ctx.load_file(f"{key}.file", raw["file"], load_acceptance_model, "acceptance model")
        if model is not None:
            curves[raw["name"]] = AcceptanceCurve(
                raw["name"],
                resolve_path(ctx.base_dir, raw["file"]),
                model,
            )
    return curves


def build_models(
    ctx: BuildContext, curves: Mapping[str, AcceptanceCurve], luts: dict[Path, LutTable | None]
) -> dict[str, ModelSpec]:
    """Build the models of the lists the mode uses, loading their LUTs into ``luts``."""
    spec = ctx.doc["speculation"]
    mode = spec["mode"]
    needed = ctx.phases_needed()
    models: dict[str, ModelSpec] = {}
    used = [k for k, v in MODEL_LISTS.items() if v in needed]
    for list_key, kind in MODEL_LISTS.items():
        if kind not in needed and spec[list_key]:
            ctx.issue(
                f"speculation.{list_key}",
                [raw["name"] for raw in spec[list_key]],
                f"[] (mode {mode!r} uses {' and '.join(used)})",
                f"mode {mode!r} runs no {kind} model",
            )
            continue
        for index, raw in enumerate(spec[list_key]):
            key = f"speculation.{list_key}[{index}]"
            _check_model_kind_keys(ctx, key, kind, raw)
            if raw["name"] in models:
                ctx.issue(
                    f"{key}.name",
                    raw["name"],
                    "names unique across all model lists",
                    "duplicate model name",
                )
                continue
            lut_path = resolve_path(ctx.base_dir, raw["lut"])
            if lut_path not in luts:
                luts[lut_path] = ctx.load_file(f"{key}.lut", raw["lut"], load_lut, "LUT")
            acceptance = raw["acceptance"]
            if kind in ("drafter", "fused") and kind in needed:
                if acceptance is None:
                    if len(curves) == 1:
                        acceptance = next(iter(curves))
                    elif len(spec["acceptance_models"]) == 1:
                        pass  # its one curve failed to load; that is reported already
                    elif not spec["acceptance_models"]:
                        ctx.issue(
                            f"{key}.acceptance",
                            None,
                            "a name from speculation.acceptance_models",
                            "no acceptance model declared",
                        )
                    else:
                        ctx.issue(
                            f"{key}.acceptance",
                            None,
                            "one of " + ", ".join(a["name"] for a in spec["acceptance_models"]),
                            "several acceptance models: name one",
                        )
                elif acceptance not in curves:
                    known = [a["name"] for a in spec["acceptance_models"]]
                    if acceptance not in known:
                        ctx.issue(
                            f"{key}.acceptance",
                            acceptance,
                            "one of " + ", ".join(known)
                            if known
                            else "a declared acceptance model",
                            "unknown acceptance model",
                        )
            models[raw["name"]] = ModelSpec(
                name=raw["name"],
                kind=cast(Any, kind),
                model_id=raw["model"] or raw["name"],
                lut_path=lut_path,
                dtype=raw["dtype"],
                acceptance=acceptance,
            )
    for kind in needed:
        if not any(m.kind == kind for m in models.values()):
            list_key = next(k for k, v in MODEL_LISTS.items() if v == kind)
            ctx.issue(
                f"speculation.{list_key}",
                [],
                f"at least one {kind} model",
                f"mode {mode!r} needs a {kind} model",
            )
    return models


def _check_model_kind_keys(ctx: BuildContext, key: str, kind: str, raw: Mapping[str, Any]) -> None:
    """Refuse model keys its kind does not use: a verifier's curve, a drafter's split."""
    if kind == "verifier" and raw["acceptance"] is not None:
        ctx.issue(
            f"{key}.acceptance",
            raw["acceptance"],
            "null: a verifier model does not draft (name the curve on the drafter or fused model)",
            "acceptance curve on a verifier model",
        )
    if kind == "drafter":
        for axis, degree in raw["parallelism"].items():
            if degree != 1:
                ctx.issue(
                    f"{key}.parallelism.{axis}",
                    degree,
                    "1 or left out: a client device runs its draft model unsplit",
                    "parallelism of a drafter model",
                )


def check_lut_coverage(
    ctx: BuildContext,
    classes: list[DeviceClass],
    models: Mapping[str, ModelSpec],
    luts: Mapping[Path, LutTable | None],
) -> None:
    """Refuse a model whose LUT lacks the rows (phase, hardware, parallelism, dtype) a device running it needs."""
    needed = ctx.phases_needed()
    model_keys: dict[str, str] = {}
    for list_key in MODEL_LISTS:
        for index, raw in enumerate(ctx.doc["speculation"][list_key]):
            model_keys.setdefault(raw["name"], f"speculation.{list_key}[{index}]")
    for device in classes:
        uses: list[tuple[str | None, str]] = (
            [(name, "drafter") for name in device.draft_models]
            if device.type == "draft"
            else [(device.model, "verifier")]
        )
        uses.append((device.fused_model, "fused"))
        for name, kind in uses:
            if name is None or kind not in needed or name not in models:
                continue
            model = models[name]
            table = luts.get(model.lut_path)
            if table is None:
                continue
            raw = next(
                r for lk in MODEL_LISTS for r in ctx.doc["speculation"][lk] if r["name"] == name
            )
            par = raw["parallelism"]
            for axis, have in (
                ("tensor", device.tensor_parallel),
                ("pipeline", device.pipeline_parallel),
            ):
                if axis in par and par[axis] != have and device.type == "target":
                    ctx.issue(
                        f"{model_keys[name]}.parallelism.{axis}",
                        par[axis],
                        f"{have} (the {axis}-parallel degree of profile {device.profile.id} used by {device.id})",
                        "parallelism differs from the serving replica's",
                    )
            table_keys = table.keys()
            for phase in needed[kind]:
                wanted = LutKey(
                    phase,
                    model.model_id,
                    device.hardware,
                    device.tensor_parallel,
                    device.pipeline_parallel,
                    model.dtype,
                )
                if wanted not in table_keys:
                    ctx.issue(
                        f"{model_keys[name]}.lut",
                        str(model.lut_path.name),
                        f"a LUT with rows for phase={phase} model={model.model_id} hardware={device.hardware} "
                        f"tp={device.tensor_parallel} pp={device.pipeline_parallel} dtype={model.dtype}"
                        + _available(table, model.model_id, device.hardware),
                        f"no LUT rows for {device.id} running {name}",
                    )


def lut_covers(
    ctx: BuildContext,
    models: Mapping[str, ModelSpec],
    luts: Mapping[Path, LutTable | None],
    device: DeviceClass,
) -> bool:
    """Whether ``device`` finds every LUT row it needs (:func:`check_lut_coverage`, reporting nothing)."""
    scratch = BuildContext(ctx.doc, ctx.file, ctx.consent)
    check_lut_coverage(scratch, [device], models, luts)
    return not scratch.issues


def _available(table: LutTable, model: str, hardware: str) -> str:
    keys = table.keys()
    have = sorted(
        f"{k.phase}/tp{k.tensor_parallel}/pp{k.pipeline_parallel}/{k.dtype}"
        for k in keys
        if k.model == model and k.hardware == hardware
    )
    if have:
        return f" (the file has for {model} on {hardware}: {', '.join(have)})"
    pairs = sorted({f"{k.model} on {k.hardware}" for k in keys})
    return f" (the file has: {', '.join(pairs)})"
