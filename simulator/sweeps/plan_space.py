"""Plan-space files: the configurations the offline placement search tries.

A plan space names a base scenario and axes (replicas and tensor-parallel
degree per target pool, speculation mode, static k, k controller). Every
combination is one configuration, turned into dotted overrides and resolved
as a point of a :class:`~simulator.sweeps.spec.Sweep`, so a plan is a sweep
whose points are configurations.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.devices.tensor_parallel import tensor_parallel_profiles, unusable_degrees_issue
from simulator.errors import InputError, Issue, make_issue
from simulator.limits import MAX_PLAN_CONFIGURATIONS
from simulator.loading import load_packaged_schema, read_document, resolve_path, schema_issues
from simulator.scenario.load import load_scenario
from simulator.scenario.model import Scenario
from simulator.sweeps.spec import Sweep, SweepPoint, build_sweep, override_text

PLAN_SPACE_SCHEMA = "plan_space.schema.json"
STATIC_CONTROLLER = "static"


@dataclass(frozen=True)
class PlanSpace:
    """A loaded plan space: the configurations as a sweep.

    Attributes:
        plan_id: Name of the plan.
        sweep: One point per configuration; a point's ``values`` are the
            configuration's axis values under their plan-space names
            (``pools.<id>.replicas``, ``speculation.mode``, ...).
        overrides: Per point (by index), the dotted scenario overrides it applies.
    """

    plan_id: str
    sweep: Sweep
    overrides: tuple[tuple[str, ...], ...]


def _pool_index(document: Mapping[str, Any]) -> dict[str, int]:
    entries = document.get("hardware_profiles", [])
    return {
        str(entry.get("id")): i
        for i, entry in enumerate(entries if isinstance(entries, list) else [])
        if isinstance(entry, dict) and entry.get("type") == "target"
    }


def _tp_choices(
    file: Path,
    scenario_file: Path,
    scenario: Scenario,
    pool: str,
    index: int,
    fixed: list[str],
    wanted: list[int],
) -> tuple[dict[int, str], list[Issue]]:
    """Profile override text per wanted degree, or issues naming the usable degrees."""
    usable: dict[int, str] = {}
    device = next(d for d in scenario.devices if d.id == pool)
    for degree, (path, _) in tensor_parallel_profiles(device.profile_path, device.hardware).items():
        relative = os.path.relpath(path, scenario_file.parent)
        try:
            load_scenario(
                scenario_file,
                overrides=[*fixed, override_text(f"hardware_profiles.{index}.profile", relative)],
            )
        except InputError:
            continue
        usable[degree] = relative
    bad = [d for d in wanted if d not in usable]
    if not bad:
        return {d: usable[d] for d in wanted}, []
    return {}, [unusable_degrees_issue(file, f"pools.{pool}.tensor_parallel", bad, usable)]


def _axes(
    file: Path, document: Mapping[str, Any], scenario_file: Path, fixed: list[str]
) -> list[list[tuple[str, Any, tuple[str, ...]]]]:
    """Each axis as its choices: (axis name, value, overrides it applies)."""
    base_document = read_document(scenario_file, "scenario")
    targets = _pool_index(base_document if isinstance(base_document, dict) else {})
    axes: list[list[tuple[str, Any, tuple[str, ...]]]] = []
    issues: list[Issue] = []
    pools: Mapping[str, Mapping[str, list[int]]] = document.get("pools", {})
    base: Scenario | None = None
    for pool, spec in pools.items():
        if pool not in targets:
            issues.append(
                make_issue(
                    file,
                    f"pools.{pool}",
                    pool,
                    f"a target pool of the scenario: {', '.join(sorted(targets)) or 'none'}",
                    "no such target pool",
                )
            )
            continue
        index = targets[pool]
        if "replicas" in spec:
            key = f"hardware_profiles.{index}.count"
            axes.append(
                [(f"pools.{pool}.replicas", n, (override_text(key, n),)) for n in spec["replicas"]]
            )
        if "tensor_parallel" in spec:
            base = base or load_scenario(scenario_file, overrides=fixed)
            choices, problems = _tp_choices(
                file, scenario_file, base, pool, index, fixed, list(spec["tensor_parallel"])
            )
            issues.extend(problems)
            key = f"hardware_profiles.{index}.profile"
            axes.append(
                [
                    (f"pools.{pool}.tensor_parallel", d, (override_text(key, text),))
                    for d, text in choices.items()
                ]
            )
    if issues:
        raise InputError(issues)
    speculation: Mapping[str, Any] = document.get("speculation", {})
    if "mode" in speculation:
        modes = speculation["mode"]
        with_mode: Mapping[str, Mapping[str, Any]] = (
            modes if isinstance(modes, dict) else {mode: {} for mode in modes}
        )
        axes.append(
            [
                (
                    "speculation.mode",
                    m,
                    (
                        override_text("speculation.mode", m),
                        *(override_text(k, v) for k, v in extra.items()),
                    ),
                )
                for m, extra in with_mode.items()
            ]
        )
    if "k" in speculation:
        axes.append(
            [("speculation.k", k, (override_text("speculation.k", k),)) for k in speculation["k"]]
        )
    if "controller" in speculation:
        axes.append(
            [
                (
                    "speculation.controller",
                    c,
                    (
                        override_text("speculation.adaptive_k.enabled", c != STATIC_CONTROLLER),
                        override_text("speculation.adaptive_k.controller", c),
                    ),
                )
                for c in speculation["controller"]
            ]
        )
    return axes


SPECULATING_AXES = ("speculation.k", "speculation.controller")


def _configurations(
    axes: list[list[tuple[str, Any, tuple[str, ...]]]],
) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """Every combination; mode none keeps the base k and controller and appears once per rest."""
    seen: set[tuple[tuple[str, str], ...]] = set()
    configurations: list[tuple[dict[str, Any], tuple[str, ...]]] = []
    for combo in itertools.product(*axes):
        plain = any(name == "speculation.mode" and value == "none" for name, value, _ in combo)
        kept = [c for c in combo if not (plain and c[0] in SPECULATING_AXES)]
        identity = tuple((name, repr(value)) for name, value, _ in kept)
        if identity in seen:
            continue
        seen.add(identity)
        values = {name: value for name, value, _ in kept}
        overrides = tuple(text for _, _, texts in kept for text in texts)
        configurations.append((values, overrides))
    return configurations


def build_plan_space(
    document: Any, source_file: Path | None, base_dir: Path, default_id: str
) -> PlanSpace:
    """Validate a plan-space document and resolve every configuration (nothing runs).

    Raises:
        InputError: The document breaks the schema, names a pool that is not
            a target pool of the scenario, a tensor-parallel degree without a
            device profile and LUT, or a configuration whose scenario does not
            load (e.g. a mode whose models the scenario does not declare).
    """
    file = source_file if source_file is not None else Path("(plan space)")
    if not isinstance(document, dict):
        raise InputError([make_issue(file, "(top level)", document, "a mapping", "not a mapping")])
    issues = schema_issues(document, load_packaged_schema(PLAN_SPACE_SCHEMA), file)
    if not issues and not ({"pools", "speculation"} & set(document)):
        issues.append(
            make_issue(
                file,
                "pools / speculation",
                sorted(document),
                "at least one axis: pools.<id>.replicas or .tensor_parallel, "
                "speculation.mode, .k or .controller",
                "no axis to search",
            )
        )
    if issues:
        raise InputError(issues)
    scenario_file = resolve_path(base_dir, document["scenario"])
    fixed_values: dict[str, Any] = dict(document.get("set", {}))
    fixed = [override_text(k, v) for k, v in fixed_values.items()]
    axes = _axes(file, document, scenario_file, fixed)
    count = math.prod(len(axis) for axis in axes)
    if count > MAX_PLAN_CONFIGURATIONS:
        lengths = " x ".join(f"{len(axis)} {axis[0][0] if axis else ''}".strip() for axis in axes)
        raise InputError(
            [
                make_issue(
                    file,
                    "pools / speculation",
                    f"{lengths} = {count:,} configurations",
                    f"at most {MAX_PLAN_CONFIGURATIONS:,} configurations (the product of the "
                    "axes' lengths; each is a capacity search of several runs)",
                    "too many configurations",
                )
            ]
        )
    configurations = _configurations(axes)
    sweep_document: dict[str, Any] = {
        "scenario": os.path.relpath(scenario_file, base_dir),
        "points": [
            {text.split("=", 1)[0]: _value(text) for text in overrides}
            for _, overrides in configurations
        ],
    }
    if fixed_values:
        sweep_document["set"] = fixed_values
    sweep = build_sweep(sweep_document, file, base_dir, default_id)
    points = tuple(
        SweepPoint(point.index, values, point.scenario, point.sha256)
        for point, (values, _) in zip(sweep.points, configurations, strict=True)
    )
    axis_names = list(dict.fromkeys(name for values, _ in configurations for name in values))
    plan_id = str(document.get("plan_id", default_id))
    return PlanSpace(
        plan_id=plan_id,
        sweep=Sweep(plan_id, source_file, scenario_file, tuple(axis_names), points),
        overrides=tuple((*fixed, *overrides) for _, overrides in configurations),
    )


def _value(text: str) -> Any:
    return json.loads(text.split("=", 1)[1])


def load_plan_space(space: str | Path | Mapping[str, Any]) -> PlanSpace:
    """Load a plan-space file, or build one from a mapping in its format.

    A mapping's relative ``scenario`` path resolves against the working
    directory; a file's against the file's folder.

    Raises:
        InputError: See :func:`build_plan_space`.
    """
    if isinstance(space, Mapping):
        return build_plan_space(dict(space), None, Path(), "plan")
    file = Path(space)
    return build_plan_space(read_document(file, "plan space"), file, file.parent, file.stem)
