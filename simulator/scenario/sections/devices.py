"""``hardware_profiles``: the device classes.

Checks and builds each class: its profile loaded (its role matching the
entry's type), the models it runs, its availability, and the total of
target replicas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.devices import (
    BUNDLED_ENGINES,
    DEFAULT_ENGINE,
    Availability,
    DeviceProfile,
    EngineProfile,
    availability_section_issues,
    build_availability,
    engine_reference,
    load_device_profile,
    load_engine_profile,
)
from simulator.devices.engine_profile import step_models
from simulator.limits import MAX_TARGET_REPLICAS
from simulator.loading import resolve_path
from simulator.scenario.model import DeviceClass, ModelSpec
from simulator.scenario.sections.context import BuildContext
from simulator.suggest import did_you_mean


def load_profiles(ctx: BuildContext) -> dict[str, DeviceProfile | None]:
    """Load every ``hardware_profiles`` entry's device profile (``None`` where it failed), by id."""
    loaded: dict[str, DeviceProfile | None] = {}
    for index, entry in enumerate(ctx.doc["hardware_profiles"]):
        key = f"hardware_profiles[{index}]"
        if entry["id"] in loaded:
            ctx.issue(
                f"{key}.id", entry["id"], "ids unique across hardware_profiles", "duplicate id"
            )
            continue
        profile = ctx.load_file(
            f"{key}.profile", entry["profile"], load_device_profile, "device profile"
        )
        if profile is not None and profile.role != entry["type"]:
            ctx.issue(
                f"{key}.type",
                entry["type"],
                f"{profile.role!r} (the role of profile {profile.id})",
                "type does not match the profile's role",
            )
        loaded[entry["id"]] = profile
    return loaded


def build_device_classes(
    ctx: BuildContext,
    profiles: Mapping[str, DeviceProfile | None],
    models: Mapping[str, ModelSpec],
) -> list[DeviceClass]:
    """Build the device classes: the models each runs, its parallelism, price and availability."""
    mode = ctx.doc["speculation"]["mode"]
    needed = ctx.phases_needed()
    classes: list[DeviceClass] = []
    for index, entry in enumerate(ctx.doc["hardware_profiles"]):
        key = f"hardware_profiles[{index}]"
        profile = profiles.get(entry["id"])
        if profile is None:
            continue
        model: str | None = None
        fused: str | None = None
        drafters: tuple[str, ...] = ()
        if entry["type"] == "draft":
            if "drafter" in needed:
                drafters = _pick_drafters(ctx, f"{key}.model", entry["model"], models)
                model = drafters[0] if drafters else None
            elif entry["model"] is not None:
                ctx.issue(
                    f"{key}.model",
                    entry["model"],
                    f"null: mode {mode!r} runs no model on client devices",
                    "model on a client class that does not draft",
                )
            if entry["fused_model"] is not None:
                ctx.issue(
                    f"{key}.fused_model",
                    entry["fused_model"],
                    "null: fused models run on target pools",
                    "fused model on a client class",
                )
            tp = pp = 1
        elif isinstance(entry["model"], list):
            ctx.issue(
                f"{key}.model",
                entry["model"],
                "one model name: a target pool serves one verifier (or fused) model "
                "(lists are for draft classes)",
                "list of models on a target class",
            )
            tp = profile.compute.tensor_parallel
            pp = profile.compute.pipeline_parallel
        else:
            if "verifier" in needed:
                model = _pick_model(ctx, f"{key}.model", entry["model"], "verifier", models)
            elif entry["model"] is not None and mode == "fused":
                fused = _pick_model(ctx, f"{key}.model", entry["model"], "fused", models)
            if entry["fused_model"] is not None:
                if "fused" in needed and mode != "fused":
                    fused = _pick_model(
                        ctx, f"{key}.fused_model", entry["fused_model"], "fused", models
                    )
                else:
                    ctx.issue(
                        f"{key}.fused_model",
                        entry["fused_model"],
                        "null: only a target in mode hybrid, or distributed with "
                        "spill_fused, serves a fused model besides its verifier"
                        + (" (in mode fused, model names it)" if mode == "fused" else ""),
                        "fused model that nothing would use",
                    )
            if "fused" in needed and fused is None:
                fused = _pick_model(ctx, f"{key}.model", None, "fused", models)
            tp = profile.compute.tensor_parallel
            pp = profile.compute.pipeline_parallel
        engine = _engine(ctx, key, entry)
        price = entry["usd_per_hour"]
        if price is None:
            price = profile.cost.usd_per_hour
        works = entry["type"] == "target" or "drafter" in needed
        availability = _availability(ctx, key, entry, profile, works)
        classes.append(
            DeviceClass(
                id=entry["id"],
                type=entry["type"],
                profile=profile,
                profile_path=resolve_path(ctx.base_dir, entry["profile"]),
                count=int(entry["count"]),
                model=model,
                fused_model=fused,
                tensor_parallel=int(tp),
                pipeline_parallel=int(pp),
                usd_per_hour=None if price is None else float(price),
                availability=availability,
                draft_models=drafters,
                engine=engine,
                role=str(entry["role"]),
            )
        )
    _check_replica_total(ctx)
    if not any(e["type"] == "target" for e in ctx.doc["hardware_profiles"]):
        ctx.issue(
            "hardware_profiles",
            [e["id"] for e in ctx.doc["hardware_profiles"]],
            "at least one entry of type target",
            "no target pool",
        )
    if mode in ("distributed", "hybrid") and not any(
        e["type"] == "draft" for e in ctx.doc["hardware_profiles"]
    ):
        ctx.issue(
            "hardware_profiles",
            [e["id"] for e in ctx.doc["hardware_profiles"]],
            "at least one entry of type draft",
            f"mode {mode!r} needs client devices that draft",
        )
    return classes


def _engine(ctx: BuildContext, key: str, entry: Mapping[str, Any]) -> EngineProfile | None:
    """A target class's engine profile (the default when it names none); refused on clients."""
    value = entry["engine"]
    if entry["type"] == "draft":
        if value is not None:
            ctx.issue(
                f"{key}.engine",
                value,
                "null: client devices run their LUT rows as they are (engine profiles "
                "describe target replicas)",
                "engine profile on a client class",
            )
        return None
    name = DEFAULT_ENGINE if value is None else value
    if "/" not in name and "." not in name and name not in BUNDLED_ENGINES:
        ctx.issue(
            f"{key}.engine",
            name,
            f"a bundled engine profile ({', '.join(BUNDLED_ENGINES)}) or the path of a "
            "profile file (.yaml, .yml or .json)",
            "unknown engine profile" + did_you_mean(name, BUNDLED_ENGINES),
        )
        return None
    return ctx.load_file(
        f"{key}.engine", engine_reference(name), load_engine_profile, "engine profile"
    )


def check_engine_layers(
    ctx: BuildContext, classes: list[DeviceClass], model_ids: Mapping[str, tuple[str, ...]]
) -> None:
    """Refuse an engine profile that launches forward passes of a model it has no layer count for.

    ``model_ids`` gives, per target class id, the LUT model ids its replicas run
    (verifier, fused and lane models).
    """
    for device in classes:
        engine = device.engine
        if engine is None or engine.launch is None:
            continue
        launch = engine.launch
        for model_id in model_ids.get(device.id, ()):
            missing = [m for m in step_models("prefill", model_id) if m not in launch.model_layers]
            for model in missing:
                ctx.issue(
                    f"hardware_profiles[{_index_of(ctx, device.id)}].engine",
                    engine.id,
                    f"an engine profile whose launch.model_layers lists {model!r} (it lists "
                    f"{', '.join(sorted(launch.model_layers))}); copy the profile and add the "
                    "model's num_hidden_layers",
                    f"engine profile {engine.id!r} cannot price eager launches of {model!r}",
                )


def _index_of(ctx: BuildContext, class_id: str) -> int:
    return next(i for i, e in enumerate(ctx.doc["hardware_profiles"]) if e["id"] == class_id)


def _check_replica_total(ctx: BuildContext) -> None:
    """Refuse more target replicas than a run may hold (named at the largest class)."""
    targets = [
        (int(e["count"]), index)
        for index, e in enumerate(ctx.doc["hardware_profiles"])
        if e["type"] == "target"
    ]
    total = sum(count for count, _ in targets)
    if total > MAX_TARGET_REPLICAS:
        count, index = max(targets)
        ctx.issue(
            f"hardware_profiles[{index}].count",
            count,
            f"at most {MAX_TARGET_REPLICAS:,} target replicas in all target classes together",
            f"{total:,} target replicas",
        )


def _availability(
    ctx: BuildContext, key: str, entry: Mapping[str, Any], profile: DeviceProfile, works: bool
) -> Availability:
    """The class's availability: its own block (checked as a profile's), else the profile's.

    Target replicas and draft devices that draft (modes distributed and
    hybrid) follow availability windows; windows on a client class that
    drafts nothing are refused.
    """
    raw = entry["availability"]
    if raw is None:
        chosen = profile.availability
    else:
        problems = availability_section_issues(raw, ctx.file, f"{key}.availability")
        ctx.issues.extend(problems)
        chosen = profile.availability if problems else build_availability(raw)
    if chosen.kind != "always" and not works:
        where = f"{key}.availability" if raw is not None else f"{key}.profile"
        ctx.issue(
            where,
            raw if raw is not None else f"{profile.id}: availability kind {chosen.kind!r}",
            "kind 'always' (or null): availability windows delay the work of target replicas, "
            "and of draft devices in modes distributed and hybrid only",
            f"availability windows on a {entry['type']} class that would ignore them",
        )
    return chosen


def _pick_drafters(
    ctx: BuildContext, key: str, value: str | list[str] | None, models: Mapping[str, ModelSpec]
) -> tuple[str, ...]:
    """The drafter models of a draft class: one name (or the only drafter), or a list."""
    if not isinstance(value, list):
        name = _pick_model(ctx, key, value, "drafter", models)
        return () if name is None else (name,)
    picked: list[str] = []
    for index, name in enumerate(value):
        if name in picked:
            ctx.issue(f"{key}[{index}]", name, "each drafter model once", "model listed twice")
            continue
        chosen = _pick_model(ctx, f"{key}[{index}]", name, "drafter", models)
        if chosen is not None:
            picked.append(chosen)
    return tuple(picked) if len(picked) == len(value) else ()


def _pick_model(
    ctx: BuildContext, key: str, name: str | None, kind: str, models: Mapping[str, ModelSpec]
) -> str | None:
    names = [m.name for m in models.values() if m.kind == kind]
    if name is None:
        if len(names) == 1:
            return names[0]
        if names:
            ctx.issue(key, None, "one of " + ", ".join(names), f"several {kind} models: name one")
        return None
    if name not in names:
        ctx.issue(
            key,
            name,
            "one of " + ", ".join(names) if names else f"a declared {kind} model",
            f"not a {kind} model",
        )
        return None
    return name
