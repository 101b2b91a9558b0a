"""Build frozen scenario objects from a schema-valid document, checking across fields.

Every check collects :class:`~simulator.errors.Issue` records instead of
raising, so that one run of the validator reports every problem of a scenario
(and of the files it references) at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar, cast

import jsonschema

from policies import registry
from policies.batching import BatchLimits
from policies.plugins import (
    PLUGIN_FAILURES,
    PluginConsent,
    PolicyImportError,
    first_line,
    import_policy,
    is_import_path,
    is_plugin,
)
from simulator.acceptance import load_acceptance_model
from simulator.builtin_data import ALLOWED as ALLOWED_BUILTIN
from simulator.builtin_data import unknown_builtin
from simulator.devices import (
    Availability,
    DeviceProfile,
    availability_section_issues,
    build_availability,
    load_device_profile,
)
from simulator.errors import InputError, Issue, make_issue
from simulator.input_files import file_problem
from simulator.limits import MAX_TARGET_REPLICAS
from simulator.loading import resolve_path, schema_issues
from simulator.lut import LutKey, LutManager, LutTable, load_lut
from simulator.scenario.model import (
    AcceptanceCurve,
    DeviceClass,
    JitterSpec,
    LaneModel,
    LaneSpec,
    LanesSpec,
    Link,
    Metadata,
    MetricsSpec,
    MicrobatchSpec,
    ModelSpec,
    NetworkSpec,
    PayloadSpec,
    Penalties,
    PlannerSpec,
    PolicyChoice,
    Scenario,
    SchedulerSpec,
    SimulationSpec,
    SpeculationSpec,
    lane_lut_key,
)
from simulator.scenario.planner_bounds import planner_size_issues
from simulator.scenario.reach import lut_reach_issues
from simulator.scenario.schema import scenario_schema
from simulator.workload import TraceSource, WorkloadSpec, build_workload_spec
from simulator.workload.issue_collector import row_key

T = TypeVar("T")

PHASES_BY_MODE: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "none": {"verifier": ("prefill", "draft_decode")},
    "distributed": {"drafter": ("prefill", "draft_decode"), "verifier": ("prefill", "verify")},
    "fused": {"fused": ("prefill", "fused_decode")},
    "hybrid": {
        "drafter": ("prefill", "draft_decode"),
        "verifier": ("prefill", "verify"),
        "fused": ("prefill", "fused_decode"),
    },
}
"""Which LUT phases each model kind needs, per mode."""

MODEL_LISTS: Mapping[str, str] = {
    "drafter_models": "drafter",
    "verifier_models": "verifier",
    "fused_models": "fused",
}

SPECULATING_KEYS: tuple[str, ...] = ("k", "temperature", "adaptive_k", "acceptance_models")
"""``speculation`` keys that only matter when something speculates (not in mode ``none``)."""

_SCHEMA = scenario_schema(plugins=False)
"""The assembled scenario schema, for the defaults of keys (built-in policy names only:
importing this module loads no plug-in)."""


_UNSET = object()
"""Stands for the default of a key whose schema gives none (the key left out)."""


def _non_defaults(
    node: Mapping[str, Any], schema: Mapping[str, Any], prefix: str
) -> Iterator[tuple[str, Any, Any]]:
    """Yield ``(key path, value, default)`` of each key under ``node`` not at its default.

    Objects with their own properties are searched key by key, so the path
    names the innermost key that was set; a key whose schema has no default
    counts as set whenever it is present.
    """
    for name, sub in schema.get("properties", {}).items():
        if name not in node:
            continue
        value = node[name]
        path = f"{prefix}.{name}"
        if isinstance(value, Mapping) and sub.get("properties"):
            yield from _non_defaults(value, sub, path)
        elif value != sub.get("default", _UNSET):
            yield path, value, sub.get("default", _UNSET)


class _Builder:
    """Accumulates issues while turning one validated document into a Scenario."""

    def __init__(self, document: Mapping[str, Any], file: Path, consent: PluginConsent) -> None:
        self.doc = document
        self.file = file
        self.consent = consent
        self.base_dir = file.parent
        self.issues: list[Issue] = []

    # -- helpers -----------------------------------------------------------
    def issue(self, key: str, value: object, allowed: str, problem: str) -> None:
        self.issues.append(make_issue(self.file, key, value, allowed, problem))

    def refuse_non_defaults(self, section: str, keys: tuple[str, ...], reason: str) -> None:
        """Report every key of ``section`` (only ``keys``, if given) that is not at its default.

        For settings that would change nothing in this scenario: ``reason``
        says why, as the end of the ``allowed`` text.
        """
        node: Mapping[str, Any] = self.doc
        schema: Mapping[str, Any] = _SCHEMA
        for part in section.split("."):
            node = node[part]
            schema = schema["properties"][part]
        if keys:
            schema = {"properties": {k: v for k, v in schema["properties"].items() if k in keys}}
        for path, value, default in _non_defaults(node, schema, section):
            allowed = (
                "the key left out" if default is _UNSET else f"{json.dumps(default)} (the default)"
            )
            self.issue(path, value, f"{allowed}: {reason}", "setting that would have no effect")

    def load_file(self, key: str, value: str, loader: Callable[[Path], T], what: str) -> T | None:
        """Load a referenced file; its own problems are reported under its own name."""
        path = resolve_path(self.base_dir, value)
        unknown = unknown_builtin(value)
        if unknown is not None:
            self.issue(key, value, ALLOWED_BUILTIN, unknown)
            return None
        problem = file_problem(path)
        if problem is not None:
            self.issue(key, value, f"an existing {what} file (resolved to {path})", problem)
            return None
        try:
            return loader(path)
        except InputError as exc:
            self.issues.extend(exc.issues)
            return None

    def policy(
        self,
        family: str,
        name: str,
        params: Mapping[str, Any],
        key: str,
        name_key: str = "policy",
    ) -> PolicyChoice:
        """Look up a policy class and build its parameters, reporting bad ones.

        ``name`` is a registered name or an import path ``module.path:ClassName``,
        imported (when the user's consent allows its module) and checked here;
        ``name_key`` is its key under ``key``.
        """
        where = {"file": str(self.file), "key": f"{key}.{name_key}"}
        if is_import_path(name):
            try:
                cls = import_policy(family, name, self.consent)
            except PolicyImportError as exc:
                self.issue(f"{key}.{name_key}", name, exc.allowed, exc.problem)
                return PolicyChoice(family=family, name=name, params=None, **where)
            try:
                jsonschema.validators.validator_for(cls.params_schema).check_schema(
                    cls.params_schema
                )
            except jsonschema.SchemaError as exc:
                self.issue(
                    f"{key}.{name_key}",
                    name,
                    "a class whose params_schema is a valid JSON Schema",
                    f"invalid params_schema: {exc.message}",
                )
                return PolicyChoice(family=family, name=name, params=None, **where)
        else:
            cls = registry(family).get(name)
        problems = schema_issues(dict(params), cls.params_schema, self.file)
        for problem in problems:
            inner = "" if problem.key_path == "(top level)" else "." + problem.key_path
            self.issues.append(
                Issue(
                    problem.file,
                    f"{key}.params{inner}",
                    problem.value,
                    problem.allowed,
                    problem.problem,
                )
            )
        built = None
        if not problems:
            try:
                built = cls.Params(**dict(params))
            except PLUGIN_FAILURES as exc:
                if not is_plugin(family, name):
                    raise  # a built-in's bug, not the user's input
                self.issue(
                    f"{key}.params",
                    dict(params),
                    "parameters the plug-in's Params accepts",
                    f"{cls.__module__}.{cls.__qualname__}.Params failed: {first_line(exc)}",
                )
        return PolicyChoice(family=family, name=name, params=built, **where)

    # -- sections ----------------------------------------------------------
    def metadata(self) -> Metadata:
        meta = self.doc["metadata"]
        label = meta["label"] if meta["label"] else self.doc["scenario_id"]
        return Metadata(meta["description"], label, tuple(meta["references"]))

    def profiles(self) -> dict[str, DeviceProfile | None]:
        loaded: dict[str, DeviceProfile | None] = {}
        for index, entry in enumerate(self.doc["hardware_profiles"]):
            key = f"hardware_profiles[{index}]"
            if entry["id"] in loaded:
                self.issue(
                    f"{key}.id", entry["id"], "ids unique across hardware_profiles", "duplicate id"
                )
                continue
            profile = self.load_file(
                f"{key}.profile", entry["profile"], load_device_profile, "device profile"
            )
            if profile is not None and profile.role != entry["type"]:
                self.issue(
                    f"{key}.type",
                    entry["type"],
                    f"{profile.role!r} (the role of profile {profile.id})",
                    "type does not match the profile's role",
                )
            loaded[entry["id"]] = profile
        return loaded

    def network(self, device_ids: Mapping[str, str]) -> NetworkSpec:
        net = self.doc["network"]
        links: list[Link] = []
        seen: set[frozenset[str]] = set()
        for index, raw in enumerate(net["links"]):
            key = f"network.links[{index}]"
            for end in ("src", "dst"):
                if raw[end] not in device_ids:
                    self.issue(
                        f"{key}.{end}",
                        raw[end],
                        "a hardware_profiles id: " + ", ".join(device_ids),
                        "unknown device",
                    )
            pair = frozenset((raw["src"], raw["dst"]))
            src_type, dst_type = device_ids.get(raw["src"]), device_ids.get(raw["dst"])
            if raw["src"] == raw["dst"]:
                self.issue(
                    f"{key}.dst", raw["dst"], "a different device than src", "link to itself"
                )
            elif src_type is not None and src_type == dst_type:
                other = "target" if src_type == "draft" else "draft"
                self.issue(
                    f"{key}.dst",
                    raw["dst"],
                    f"a {other} class: a link joins client devices (draft) to a target pool",
                    f"link between two {src_type} classes ({raw['src']} and {raw['dst']}): "
                    "no work moves between them in this version",
                )
            elif pair in seen:
                self.issue(
                    key, f"{raw['src']} <-> {raw['dst']}", "one link per pair", "duplicate link"
                )
            seen.add(pair)
            links.append(
                Link(
                    raw["src"],
                    raw["dst"],
                    float(raw["rtt_ms"]),
                    float(raw["bw_mbps"]),
                    float(raw["loss_pct"]),
                )
            )
        jitter = net["jitter"]
        payload = net["payload"]
        return NetworkSpec(
            links=tuple(links),
            jitter=JitterSpec(
                bool(jitter["enabled"]),
                float(jitter["rtt_sigma_ms"]),
                float(jitter["bw_sigma_pct"]),
            ),
            payload=PayloadSpec(
                float(payload["bytes_per_prompt_token"]),
                float(payload["bytes_per_draft_token"]),
                float(payload["bytes_per_result_token"]),
            ),
        )

    def acceptance(self) -> dict[str, AcceptanceCurve]:
        curves: dict[str, AcceptanceCurve] = {}
        for index, raw in enumerate(self.doc["speculation"]["acceptance_models"]):
            key = f"speculation.acceptance_models[{index}]"
            if raw["name"] in curves:
                self.issue(f"{key}.name", raw["name"], "unique names", "duplicate acceptance model")
                continue
            model = self.load_file(
                f"{key}.file", raw["file"], load_acceptance_model, "acceptance model"
            )
            if model is not None:
                curves[raw["name"]] = AcceptanceCurve(
                    raw["name"],
                    resolve_path(self.base_dir, raw["file"]),
                    model,
                )
        return curves

    def models(
        self, curves: Mapping[str, AcceptanceCurve], luts: dict[Path, LutTable | None]
    ) -> dict[str, ModelSpec]:
        spec = self.doc["speculation"]
        mode = spec["mode"]
        needed = self.phases_needed()
        models: dict[str, ModelSpec] = {}
        used = [k for k, v in MODEL_LISTS.items() if v in needed]
        for list_key, kind in MODEL_LISTS.items():
            if kind not in needed and spec[list_key]:
                self.issue(
                    f"speculation.{list_key}",
                    [raw["name"] for raw in spec[list_key]],
                    f"[] (mode {mode!r} uses {' and '.join(used)})",
                    f"mode {mode!r} runs no {kind} model",
                )
                continue
            for index, raw in enumerate(spec[list_key]):
                key = f"speculation.{list_key}[{index}]"
                self.model_kind_keys(key, kind, raw)
                if raw["name"] in models:
                    self.issue(
                        f"{key}.name",
                        raw["name"],
                        "names unique across all model lists",
                        "duplicate model name",
                    )
                    continue
                lut_path = resolve_path(self.base_dir, raw["lut"])
                if lut_path not in luts:
                    luts[lut_path] = self.load_file(f"{key}.lut", raw["lut"], load_lut, "LUT")
                acceptance = raw["acceptance"]
                if kind in ("drafter", "fused") and kind in needed:
                    if acceptance is None:
                        if len(curves) == 1:
                            acceptance = next(iter(curves))
                        elif len(spec["acceptance_models"]) == 1:
                            pass  # its one curve failed to load; that is reported already
                        elif not spec["acceptance_models"]:
                            self.issue(
                                f"{key}.acceptance",
                                None,
                                "a name from speculation.acceptance_models",
                                "no acceptance model declared",
                            )
                        else:
                            self.issue(
                                f"{key}.acceptance",
                                None,
                                "one of " + ", ".join(a["name"] for a in spec["acceptance_models"]),
                                "several acceptance models: name one",
                            )
                    elif acceptance not in curves:
                        known = [a["name"] for a in spec["acceptance_models"]]
                        if acceptance not in known:
                            self.issue(
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
                self.issue(
                    f"speculation.{list_key}",
                    [],
                    f"at least one {kind} model",
                    f"mode {mode!r} needs a {kind} model",
                )
        return models

    def spills_to_fused(self) -> bool:
        """Whether the verify policy moves requests whose KV does not fit to fused mode."""
        verify = self.doc["scheduler"]["verify"]
        params = verify.get("params") or {}
        return bool(
            verify["policy"] == "kv_aware_edf" and params.get("on_kv_short") == "spill_fused"
        )

    def phases_needed(self) -> Mapping[str, tuple[str, ...]]:
        """The LUT phases each model kind needs: the mode's, plus the fused model's for spills."""
        mode = self.doc["speculation"]["mode"]
        needed = PHASES_BY_MODE[mode]
        if mode == "distributed" and self.doc["speculation"]["adaptive_k"]["k_min"] == 0:
            # A k = 0 round is a plain decode step of the verifier.
            needed = {**needed, "verifier": (*needed["verifier"], "draft_decode")}
        if mode == "distributed" and self.spills_to_fused():
            return {**needed, "fused": PHASES_BY_MODE["fused"]["fused"]}
        return needed

    def kv_guard(self, classes: list[DeviceClass]) -> None:
        """Refuse a KV guard that could never act, and spills with no fused model to go to."""
        sched = self.doc["scheduler"]
        mode = self.doc["speculation"]["mode"]
        if sched["verify"]["policy"] == "kv_aware_edf" and mode not in ("distributed", "hybrid"):
            self.issue(
                "scheduler.verify.policy",
                "kv_aware_edf",
                f"edf: mode {mode!r} runs no verify steps, the only work kv_aware_edf guards",
                "KV guard without verify steps",
            )
            return
        if sched["verify"]["policy"] == "kv_aware_edf" and sched["kv"]["on_full"] == "queue":
            self.issue(
                "scheduler.verify.policy",
                "kv_aware_edf",
                "edf with scheduler.kv.on_full queue (which reserves every request's KV, drafts "
                "included, at prefill, so a verify step adds none), or kv_aware_edf with "
                "scheduler.kv.on_full preempt_recompute",
                "KV guard that never holds anything back",
            )
            return
        if not self.spills_to_fused():
            return
        key = "scheduler.verify.params.on_kv_short"
        for device in classes:
            if device.type == "target" and device.fused_model is None:
                self.issue(
                    key,
                    "spill_fused",
                    "delay, or a fused model declared under speculation.fused_models for "
                    f"target pool {device.id}",
                    "spill to fused mode on a replica with no fused model",
                )

    def model_kind_keys(self, key: str, kind: str, raw: Mapping[str, Any]) -> None:
        """Refuse model keys its kind does not use: a verifier's curve, a drafter's split."""
        if kind == "verifier" and raw["acceptance"] is not None:
            self.issue(
                f"{key}.acceptance",
                raw["acceptance"],
                "null: a verifier model does not draft (name the curve on the drafter or "
                "fused model)",
                "acceptance curve on a verifier model",
            )
        if kind == "drafter":
            for axis, degree in raw["parallelism"].items():
                if degree != 1:
                    self.issue(
                        f"{key}.parallelism.{axis}",
                        degree,
                        "1 or left out: a client device runs its draft model unsplit",
                        "parallelism of a drafter model",
                    )

    def device_classes(
        self,
        profiles: Mapping[str, DeviceProfile | None],
        models: Mapping[str, ModelSpec],
    ) -> list[DeviceClass]:
        mode = self.doc["speculation"]["mode"]
        needed = self.phases_needed()
        classes: list[DeviceClass] = []
        for index, entry in enumerate(self.doc["hardware_profiles"]):
            key = f"hardware_profiles[{index}]"
            profile = profiles.get(entry["id"])
            if profile is None:
                continue
            model: str | None = None
            fused: str | None = None
            drafters: tuple[str, ...] = ()
            if entry["type"] == "draft":
                if "drafter" in needed:
                    drafters = self.pick_drafters(f"{key}.model", entry["model"], models)
                    model = drafters[0] if drafters else None
                elif entry["model"] is not None:
                    self.issue(
                        f"{key}.model",
                        entry["model"],
                        f"null: mode {mode!r} runs no model on client devices",
                        "model on a client class that does not draft",
                    )
                if entry["fused_model"] is not None:
                    self.issue(
                        f"{key}.fused_model",
                        entry["fused_model"],
                        "null: fused models run on target pools",
                        "fused model on a client class",
                    )
                tp = pp = 1
            elif isinstance(entry["model"], list):
                self.issue(
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
                    model = self.pick_model(f"{key}.model", entry["model"], "verifier", models)
                elif entry["model"] is not None and mode == "fused":
                    fused = self.pick_model(f"{key}.model", entry["model"], "fused", models)
                if entry["fused_model"] is not None:
                    if "fused" in needed and mode != "fused":
                        fused = self.pick_model(
                            f"{key}.fused_model", entry["fused_model"], "fused", models
                        )
                    else:
                        self.issue(
                            f"{key}.fused_model",
                            entry["fused_model"],
                            "null: only a target in mode hybrid, or distributed with "
                            "spill_fused, serves a fused model besides its verifier"
                            + (" (in mode fused, model names it)" if mode == "fused" else ""),
                            "fused model that nothing would use",
                        )
                if "fused" in needed and fused is None:
                    fused = self.pick_model(f"{key}.model", None, "fused", models)
                tp = profile.compute.tensor_parallel
                pp = profile.compute.pipeline_parallel
            price = entry["usd_per_hour"]
            if price is None:
                price = profile.cost.usd_per_hour
            works = entry["type"] == "target" or "drafter" in needed
            availability = self.availability(key, entry, profile, works)
            classes.append(
                DeviceClass(
                    id=entry["id"],
                    type=entry["type"],
                    profile=profile,
                    profile_path=resolve_path(self.base_dir, entry["profile"]),
                    count=int(entry["count"]),
                    model=model,
                    fused_model=fused,
                    tensor_parallel=int(tp),
                    pipeline_parallel=int(pp),
                    usd_per_hour=None if price is None else float(price),
                    availability=availability,
                    draft_models=drafters,
                )
            )
        self.replica_total()
        if not any(e["type"] == "target" for e in self.doc["hardware_profiles"]):
            self.issue(
                "hardware_profiles",
                [e["id"] for e in self.doc["hardware_profiles"]],
                "at least one entry of type target",
                "no target pool",
            )
        if mode in ("distributed", "hybrid") and not any(
            e["type"] == "draft" for e in self.doc["hardware_profiles"]
        ):
            self.issue(
                "hardware_profiles",
                [e["id"] for e in self.doc["hardware_profiles"]],
                "at least one entry of type draft",
                f"mode {mode!r} needs client devices that draft",
            )
        return classes

    def replica_total(self) -> None:
        """Refuse more target replicas than a run may hold (named at the largest class)."""
        targets = [
            (int(e["count"]), index)
            for index, e in enumerate(self.doc["hardware_profiles"])
            if e["type"] == "target"
        ]
        total = sum(count for count, _ in targets)
        if total > MAX_TARGET_REPLICAS:
            count, index = max(targets)
            self.issue(
                f"hardware_profiles[{index}].count",
                count,
                f"at most {MAX_TARGET_REPLICAS:,} target replicas in all target classes together",
                f"{total:,} target replicas",
            )

    def availability(
        self, key: str, entry: Mapping[str, Any], profile: DeviceProfile, works: bool
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
            problems = availability_section_issues(raw, self.file, f"{key}.availability")
            self.issues.extend(problems)
            chosen = profile.availability if problems else build_availability(raw)
        if chosen.kind != "always" and not works:
            where = f"{key}.availability" if raw is not None else f"{key}.profile"
            self.issue(
                where,
                raw if raw is not None else f"{profile.id}: availability kind {chosen.kind!r}",
                "kind 'always' (or null): availability windows delay the work of target replicas, "
                "and of draft devices in modes distributed and hybrid only",
                f"availability windows on a {entry['type']} class that would ignore them",
            )
        return chosen

    def pick_drafters(
        self, key: str, value: str | list[str] | None, models: Mapping[str, ModelSpec]
    ) -> tuple[str, ...]:
        """The drafter models of a draft class: one name (or the only drafter), or a list."""
        if not isinstance(value, list):
            name = self.pick_model(key, value, "drafter", models)
            return () if name is None else (name,)
        picked: list[str] = []
        for index, name in enumerate(value):
            if name in picked:
                self.issue(f"{key}[{index}]", name, "each drafter model once", "model listed twice")
                continue
            chosen = self.pick_model(f"{key}[{index}]", name, "drafter", models)
            if chosen is not None:
                picked.append(chosen)
        return tuple(picked) if len(picked) == len(value) else ()

    def pick_model(
        self, key: str, name: str | None, kind: str, models: Mapping[str, ModelSpec]
    ) -> str | None:
        names = [m.name for m in models.values() if m.kind == kind]
        if name is None:
            if len(names) == 1:
                return names[0]
            if names:
                self.issue(
                    key, None, "one of " + ", ".join(names), f"several {kind} models: name one"
                )
            return None
        if name not in names:
            self.issue(
                key,
                name,
                "one of " + ", ".join(names) if names else f"a declared {kind} model",
                f"not a {kind} model",
            )
            return None
        return name

    def lut_coverage(
        self,
        classes: list[DeviceClass],
        models: Mapping[str, ModelSpec],
        luts: Mapping[Path, LutTable | None],
    ) -> None:
        needed = self.phases_needed()
        model_keys: dict[str, str] = {}
        for list_key in MODEL_LISTS:
            for index, raw in enumerate(self.doc["speculation"][list_key]):
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
                    r
                    for lk in MODEL_LISTS
                    for r in self.doc["speculation"][lk]
                    if r["name"] == name
                )
                par = raw["parallelism"]
                for axis, have in (
                    ("tensor", device.tensor_parallel),
                    ("pipeline", device.pipeline_parallel),
                ):
                    if axis in par and par[axis] != have and device.type == "target":
                        self.issue(
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
                        self.issue(
                            f"{model_keys[name]}.lut",
                            str(model.lut_path.name),
                            f"a LUT with rows for phase={phase} model={model.model_id} hardware={device.hardware} "
                            f"tp={device.tensor_parallel} pp={device.pipeline_parallel} dtype={model.dtype}"
                            + _available(table, model.model_id, device.hardware),
                            f"no LUT rows for {device.id} running {name}",
                        )

    def speculation(
        self, models: dict[str, ModelSpec], curves: dict[str, AcceptanceCurve]
    ) -> SpeculationSpec:
        spec = self.doc["speculation"]
        mode = spec["mode"]
        if mode == "none":
            self.refuse_non_defaults(
                "speculation", SPECULATING_KEYS, "nothing speculates in mode 'none'"
            )
        if mode != "hybrid":
            self.refuse_non_defaults(
                "speculation.hybrid", (), f"it applies only in mode 'hybrid', not {mode!r}"
            )
        adaptive = spec["adaptive_k"]
        k = int(spec["k"])
        k_min, k_max = int(adaptive["k_min"]), int(adaptive["k_max"])
        if k_min > k_max:
            self.issue(
                "speculation.adaptive_k.k_min",
                k_min,
                f"<= k_max ({k_max})",
                "k_min greater than k_max",
            )
        elif k_min == 0 and mode in ("fused", "hybrid"):
            self.issue(
                "speculation.adaptive_k.k_min",
                k_min,
                ">= 1 in mode "
                + repr(mode)
                + " (k = 0 runs a plain decode step of the target, priced by the verifier's "
                "draft_decode LUT rows; only mode 'distributed' has them)",
                "k_min 0 outside mode distributed",
            )
        elif not k_min <= k <= k_max:
            self.issue(
                "speculation.k",
                k,
                f"between k_min ({k_min}) and k_max ({k_max})",
                "k outside the allowed range",
            )
        controller = adaptive["controller"] if adaptive["enabled"] else "static"
        if not adaptive["enabled"] and adaptive["controller"] != "static":
            self.issue(
                "speculation.adaptive_k.controller",
                adaptive["controller"],
                "'static' while adaptive_k.enabled is false (or set enabled: true)",
                "controller given but adaptive k disabled",
            )
        if controller == "static" and spec["mode"] != "none":
            adaptive_names = [n for n in registry("k_control").names() if n != "static"]
            allowed = (
                "a controller other than static: " + ", ".join(adaptive_names)
                if adaptive_names
                else "no adaptive controller is registered in this version"
            )
            if adaptive["enabled"]:
                self.issue(
                    "speculation.adaptive_k.enabled",
                    True,
                    f"false, or adaptive_k.controller set to {allowed}",
                    "adaptive k enabled with the static controller, which never adapts",
                )
            if k_min != 1:
                self.issue(
                    "speculation.adaptive_k.k_min",
                    k_min,
                    "1 with the static controller (k_min bounds adaptive controllers only; "
                    "the static one drafts speculation.k every round)",
                    "k_min that no controller uses",
                )
        hybrid = spec["hybrid"]
        hybrid_choice = PolicyChoice("hybrid_mode", hybrid["policy"], None)
        if spec["mode"] == "hybrid":
            hybrid_choice = self.policy(
                "hybrid_mode", hybrid["policy"], hybrid["params"], "speculation.hybrid"
            )
        return SpeculationSpec(
            mode=spec["mode"],
            models=models,
            acceptance=curves,
            k=k,
            k_min=k_min,
            k_max=k_max,
            temperature=float(spec["temperature"]),
            k_control=self.policy(
                "k_control",
                controller,
                adaptive["params"],
                "speculation.adaptive_k",
                name_key="controller",
            ),
            hybrid=hybrid_choice,
        )

    def lane(self, name: str, family: str) -> LaneSpec:
        raw = self.doc["scheduler"][name]
        batching = raw["batching"]
        lane = LaneSpec(
            policy=self.policy(family, raw["policy"], raw["params"], f"scheduler.{name}"),
            limits=BatchLimits(
                int(batching["max_batch"]), float(batching["max_wait_ms"]), batching["max_tokens"]
            ),
        )
        if "microbatch" not in raw:  # only the verify lane has microbatch settings
            return lane
        micro = raw["microbatch"]
        if micro["fallback"] != "per_request" and micro["max_context_ratio"] != 2.0:
            self.issue(
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

    def draft_selection(self) -> PolicyChoice:
        """``scheduler.draft.model_selection``: refused unless a draft class lists several models."""
        raw = self.doc["scheduler"]["draft"]["model_selection"]
        mode = self.doc["speculation"]["mode"]
        if "drafter" in PHASES_BY_MODE[mode] and not any(
            e["type"] == "draft" and isinstance(e["model"], list) and len(e["model"]) > 1
            for e in self.doc["hardware_profiles"]
        ):
            self.refuse_non_defaults(
                "scheduler.draft",
                ("model_selection",),
                "every draft class runs one drafter model (list several under "
                "hardware_profiles[].model for a policy to choose among)",
            )
        choice = self.policy(
            "draft_selection", raw["policy"], raw["params"], "scheduler.draft.model_selection"
        )
        model = getattr(choice.params, "model", None)
        listed = self.multi_model_drafters()
        if raw["policy"] == "fixed" and model is not None and listed and model not in listed:
            self.issue(
                "scheduler.draft.model_selection.params.model",
                model,
                "a drafter model listed by a draft class with several models: " + ", ".join(listed),
                "model no draft class chooses among",
            )
        return choice

    def splits_rounds(self) -> bool:
        """Whether ``scheduler.arbitration.policy`` is a lane rule (it splits fused rounds)."""
        name = self.doc["scheduler"]["arbitration"]["policy"]
        try:
            cls = (
                import_policy("arbitration", name, self.consent)
                if is_import_path(name)
                else registry("arbitration").get(name)
            )
        except (PolicyImportError, KeyError):
            return False  # reported where the policy is built
        return bool(getattr(cls, "splits_rounds", False))

    def lanes(self, classes: list[DeviceClass], luts: dict[Path, LutTable | None]) -> LanesSpec:
        """``scheduler.lanes``: refuse settings the arbitration rule does not use; load its LUTs."""
        raw = self.doc["scheduler"]["lanes"]
        sched = self.doc["scheduler"]
        rule = sched["arbitration"]["policy"]
        mode = self.doc["speculation"]["mode"]
        key = "scheduler.lanes"
        if not self.splits_rounds():
            self.refuse_non_defaults(
                key,
                (),
                f"scheduler.arbitration.policy {rule} runs whole rounds; scheduler.lanes is read "
                "by the lane rules (baseline, pd, pdv, pdv_hybrid, pdv_unified), which split "
                "fused rounds",
            )
            return LanesSpec()
        if mode != "fused":
            self.issue(
                "scheduler.arbitration.policy",
                rule,
                f"prefill_first or chunked_prefill in mode {mode!r} (lane rules split fused "
                "rounds: mode fused)",
                "lane rule without fused rounds",
            )
            return LanesSpec()
        if sched["kv"]["on_full"] != "queue" and raw["gpu_sharing"] == "overlap":
            self.issue(
                "scheduler.kv.on_full",
                sched["kv"]["on_full"],
                f"queue with scheduler.arbitration.policy {rule} and scheduler.lanes.gpu_sharing "
                "overlap (recompute preemption is modelled for one iteration at a time: "
                "gpu_sharing serialized)",
                "KV rule the overlapping lanes do not run",
            )
        micro_schema = _SCHEMA["properties"]["scheduler"]["properties"]["verify"]["properties"][
            "microbatch"
        ]["properties"]
        micro = sched["verify"]["microbatch"]
        if any(
            micro.get(key, spec["default"]) != spec["default"] for key, spec in micro_schema.items()
        ):
            self.issue(
                "scheduler.verify.microbatch",
                micro,
                f"the defaults with scheduler.arbitration.policy {rule} (a lane iteration is "
                "priced whole, at its mean context and largest k)",
                "microbatch split the lane rules do not run",
            )
        overlap = raw["gpu_sharing"] == "overlap"
        if overlap and raw["overlap_efficiency"] is None:
            self.issue(
                f"{key}.overlap_efficiency",
                None,
                "a number from 0.5 (no overlap) to 1 (perfect overlap) with gpu_sharing overlap",
                "overlap model without its efficiency",
            )
        if not overlap and raw["overlap_efficiency"] is not None:
            self.issue(
                f"{key}.overlap_efficiency",
                raw["overlap_efficiency"],
                "null (the default) with gpu_sharing serialized (iterations never overlap)",
                "setting that would have no effect",
            )
        if overlap and rule == "pdv_unified":
            self.issue(
                f"{key}.gpu_sharing",
                "overlap",
                "serialized with pdv_unified (its one worker runs one iteration at a time)",
                "overlap with nothing to overlap",
            )
        if overlap:
            for device in classes:
                if device.type == "target" and device.profile.compute.thermal is not None:
                    self.issue(
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
                self.issue(
                    f"{key}.{role}",
                    None,
                    f"{{lut: ..., model: ...}} naming the LUT with the {phase} rows of the "
                    f"fused model's {'draft' if role == 'drafter' else 'target'} model",
                    f"lane rule {rule} needs the split costs of a round",
                )
                models[role] = None
                continue
            path = resolve_path(self.base_dir, entry["lut"])
            if path not in luts:
                luts[path] = self.load_file(f"{key}.{role}.lut", entry["lut"], load_lut, "LUT")
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
                    self.issue(
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

    def scheduler(self, lanes: LanesSpec) -> SchedulerSpec:
        sched = self.doc["scheduler"]
        if sched["arbitration"]["policy"] == "chunked_prefill":
            if sched["prefill"]["policy"] != "fcfs":
                self.issue(
                    "scheduler.prefill.policy",
                    sched["prefill"]["policy"],
                    "fcfs with chunked_prefill (prompts join each iteration's token budget in "
                    "arrival order; no prefill batch is formed for a policy to time)",
                    "prefill batching policy that chunked prefill does not use",
                )
            prefill = sched["prefill"]["batching"]
            for key, default in (("max_wait_ms", 0), ("max_tokens", None)):
                if prefill[key] != default:
                    self.issue(
                        f"scheduler.prefill.batching.{key}",
                        prefill[key],
                        f"{default if default is not None else 'null'} with chunked_prefill "
                        "(its token_budget bounds every iteration; prompts never wait for a batch)",
                        "prefill batching limit that chunked prefill does not use",
                    )
        wait_ms = sched["verify"]["batching"]["max_wait_ms"]
        mode = self.doc["speculation"]["mode"]
        if wait_ms > 0 and mode in ("none", "fused"):
            self.issue(
                "scheduler.verify.batching.max_wait_ms",
                wait_ms,
                "0 in mode " + repr(mode) + " (it holds back verify bundles arriving from "
                "client devices, in modes distributed and hybrid)",
                "decode-lane requests never wait for a batch: each is ready again when its "
                "own iteration ends",
            )
        if "drafter" not in PHASES_BY_MODE[mode]:
            reason = f"no client device drafts in mode {mode!r}"
            self.refuse_non_defaults("scheduler.draft", (), reason)
            self.refuse_non_defaults("network.payload", ("bytes_per_draft_token",), reason)
        return SchedulerSpec(
            prefill=self.lane("prefill", "prefill_batching"),
            draft=self.lane("draft", "draft_scheduling"),
            verify=self.lane("verify", "verify_batching"),
            routing=self.policy(
                "routing",
                sched["routing"]["policy"],
                sched["routing"]["params"],
                "scheduler.routing",
            ),
            admission=self.policy(
                "admission",
                sched["admission_control"]["policy"],
                sched["admission_control"]["params"],
                "scheduler.admission_control",
            ),
            kv_on_full=sched["kv"]["on_full"],
            max_running_requests=int(sched["max_running_requests"]),
            arbitration=self.policy(
                "arbitration",
                sched["arbitration"]["policy"],
                sched["arbitration"]["params"],
                "scheduler.arbitration",
            ),
            draft_selection=self.draft_selection(),
            lanes=lanes,
        )

    def planner(self) -> PlannerSpec:
        raw = self.doc["planner"]
        candidates = raw["candidates"]
        if not raw["enabled"]:
            self.refuse_non_defaults(
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
                ),
                "planner.enabled is false, so no planner runs",
            )
        else:
            self._check_planner(raw)
        return PlannerSpec(
            bool(raw["enabled"]),
            float(raw["interval_s"]),
            float(raw["window_s"]),
            tuple(raw["objectives"]),
            {name: tuple(values) for name, values in candidates.items()},
            float(raw.get("model_load_s", 0.0)),
            str(raw["search"]),
            raw["analytic_keep"],
            Penalties(float(raw["penalties"]["energy_per_kj"])),
        )

    def _check_planner(self, raw: Mapping[str, Any]) -> None:
        """Refuse planner settings the online planner cannot honour."""
        candidates = raw["candidates"]
        if "model_load_s" not in raw:
            self.issue(
                "planner.model_load_s",
                None,
                "seconds a new replica takes to load its model (a property of the deployment)",
                "missing with planner.enabled: true",
            )
        if raw["objectives"][0] != "goodput":
            self.issue(
                "planner.objectives",
                raw["objectives"],
                "goodput first, then tie-breakers (p95_tpot, p95_ttft, p95_tvt, energy, cost)",
                "the first objective is not goodput",
            )
        if len(set(raw["objectives"])) != len(raw["objectives"]):
            self.issue(
                "planner.objectives", raw["objectives"], "each objective once", "repeated objective"
            )
        if not candidates:
            self.issue(
                "planner.candidates",
                candidates,
                "at least one candidate list ("
                + ", ".join(
                    _SCHEMA["properties"]["planner"]["properties"]["candidates"]["properties"]
                )
                + ")",
                "no candidate to choose from",
            )
        spec = self.doc["speculation"]
        self._check_replica_candidates(candidates, spec["mode"])
        targets = [int(e["count"]) for e in self.doc["hardware_profiles"] if e["type"] == "target"]
        self.issues.extend(planner_size_issues(self.file, raw, targets))
        if "fused_fraction" in candidates and (
            spec["mode"] != "hybrid" or spec["hybrid"]["policy"] != "fused_fraction"
        ):
            self.issue(
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
            self.issue(
                "planner.analytic_keep",
                raw["analytic_keep"],
                "null, or speculation.hybrid.policy: fused_fraction (the estimate needs the share "
                "of requests served fused, which only that policy fixes)",
                f"no fused share to estimate with hybrid policy {spec['hybrid']['policy']!r}",
            )
        self._check_planner_speculation(candidates)
        if self.doc["workload"].get("closed_loop") is not None:
            self.issue(
                "planner.enabled",
                True,
                "false with workload.closed_loop (what-if windows replay recent arrival times, "
                "which closed-loop users do not have)",
                "planner with a closed-loop workload",
            )

    def _check_replica_candidates(self, candidates: Mapping[str, Any], mode: str) -> None:
        """Refuse draft replicas outside hybrid mode and a candidate without any replica."""
        draft = candidates.get("draft_replicas")
        verify = candidates.get("verify_replicas")
        if draft is not None and mode != "hybrid":
            self.issue(
                "planner.candidates.draft_replicas",
                draft,
                "the key left out, or speculation.mode: hybrid (draft replicas serve the "
                "requests the hybrid policy sends fused; in other modes the drafts run on "
                "the clients' devices or on every replica)",
                f"no server-side drafting to size in mode {mode!r}",
            )
        if verify is not None and 0 in verify and draft is None:
            self.issue(
                "planner.candidates.verify_replicas",
                verify,
                "at least 1 each (0 only with draft_replicas)",
                "a candidate with no replica",
            )
        if draft is not None and 0 in draft and verify is not None and 0 in verify:
            self.issue(
                "planner.candidates.draft_replicas",
                draft,
                "values whose sum with every verify_replicas value is at least 1 "
                "(0 in both lists makes a pool without replicas)",
                "a candidate (draft_replicas 0, verify_replicas 0) with no replica",
            )

    def _check_planner_speculation(self, candidates: Mapping[str, Any]) -> None:
        """Refuse draft-length, microbatch and drafter-model candidates the scenario cannot run."""
        spec = self.doc["speculation"]
        mode = spec["mode"]
        for key in ("k", "k_controller"):
            if key in candidates and mode == "none":
                self.issue(
                    f"planner.candidates.{key}",
                    candidates[key],
                    "the key left out in mode 'none' (nothing drafts)",
                    "draft-length candidate without speculation",
                )
        if "k" in candidates and "k_controller" in candidates:
            self.issue(
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
            self.issue(
                "planner.candidates.k",
                candidates["k"],
                f"draft lengths between {low} and speculation.adaptive_k.k_max ({high})",
                f"k outside the allowed range: {outside}",
            )
        names = registry("k_control").names()
        unknown = [name for name in candidates.get("k_controller", ()) if name not in names]
        if unknown and mode != "none":
            self.issue(
                "planner.candidates.k_controller",
                candidates["k_controller"],
                "registered k controllers: " + ", ".join(names),
                f"unknown k controller: {', '.join(unknown)}",
            )
        rule = self.doc["scheduler"]["arbitration"]["policy"]
        if "max_microbatch" in candidates and self.splits_rounds():
            self.issue(
                "planner.candidates.max_microbatch",
                candidates["max_microbatch"],
                f"the key left out with scheduler.arbitration.policy {rule} (a lane rule prices "
                "each iteration whole, never split into microbatches)",
                "microbatch candidates the lane rules do not run",
            )
        if "draft_model" in candidates:
            self._check_planner_draft_models(candidates["draft_model"])

    def _check_planner_draft_models(self, models: Sequence[str]) -> None:
        """Refuse drafter-model candidates no draft class with several models lists."""
        listed = self.multi_model_drafters()
        if not listed:
            self.issue(
                "planner.candidates.draft_model",
                list(models),
                "the key left out unless speculation.mode drafts on devices (distributed or "
                "hybrid) and a draft class lists several models under hardware_profiles[].model",
                "no drafter model to choose",
            )
            return
        unknown = [name for name in models if name not in listed]
        if unknown:
            self.issue(
                "planner.candidates.draft_model",
                list(models),
                "drafter models listed by a draft class with several models: " + ", ".join(listed),
                f"unknown or unlisted drafter model: {', '.join(unknown)}",
            )

    def multi_model_drafters(self) -> list[str]:
        """Drafter models listed by draft classes with several models, in listed order.

        None in a mode where no device drafts.
        """
        if "drafter" not in PHASES_BY_MODE[self.doc["speculation"]["mode"]]:
            return []
        names: dict[str, None] = {}
        for entry in self.doc["hardware_profiles"]:
            if (
                entry["type"] == "draft"
                and isinstance(entry["model"], list)
                and len(entry["model"]) > 1
            ):
                names.update(dict.fromkeys(entry["model"]))
        return list(names)

    def metrics(self) -> MetricsSpec:
        raw = self.doc["metrics"]
        return MetricsSpec(
            raw["output_dir"],
            bool(raw["record_energy"]),
            bool(raw["record_cost"]),
            float(raw["timeseries_interval_s"]),
            float(raw["warmup_s"]),
            None
            if raw["electricity_usd_per_kwh"] is None
            else float(raw["electricity_usd_per_kwh"]),
        )

    def simulation(self) -> SimulationSpec:
        """Build the run-control settings."""
        raw = self.doc["simulation"]
        until = raw["until_s"]
        return SimulationSpec(
            until_s=None if until is None else float(until),
            lut_out_of_range=raw["lut_out_of_range"],
            fuse_iterations=bool(raw["fuse_iterations"]),
        )

    def workload(self, client_ids: list[str]) -> WorkloadSpec | None:
        spec, issues = build_workload_spec(self.doc["workload"], self.file)
        self.issues.extend(issues)
        if spec is None:
            return None
        declared = "a hardware_profiles id of type draft: " + (
            ", ".join(client_ids) or "(none declared)"
        )
        problem = "origin names an undeclared client device class"
        trace = spec.source.trace if isinstance(spec.source, TraceSource) else None
        for name in sorted(spec.origin_names()):
            if name in client_ids:
                continue
            rows = trace.rows_with_origin(name) if trace is not None else []
            if trace is None or not rows:
                self.issue("workload.origin.weights", name, declared, problem)
                continue
            self.issues.append(
                make_issue(
                    trace.path,
                    row_key(rows[0], "origin"),
                    name,
                    f"{declared} (declared under hardware_profiles in {self.file})",
                    f"{problem} ({len(rows)} row(s) name it; the first is listed)",
                )
            )
        return spec

    def client_links(self, classes: list[DeviceClass], network: NetworkSpec) -> None:
        targets = [d.id for d in classes if d.type == "target"]
        for index, entry in enumerate(self.doc["hardware_profiles"]):
            if entry["type"] != "draft" or not targets:
                continue
            if not any(network.link_between(entry["id"], t) for t in targets):
                self.issue(
                    f"hardware_profiles[{index}].id",
                    entry["id"],
                    "a network.links entry joining it to a target: " + ", ".join(targets),
                    "client device class has no link to any target",
                )


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


def build_scenario(
    document: Mapping[str, Any],
    file: Path,
    resolved: Mapping[str, Any] | None = None,
    consent: PluginConsent | None = None,
) -> Scenario:
    """Build a :class:`Scenario` from a schema-valid, default-filled document.

    ``resolved`` is the document to record as the scenario's resolved form
    (default: ``document``). ``consent`` names the modules an import-path
    policy may come from (default: those the environment variable
    ``SPECDEC_ALLOW_PLUGINS`` names); no other module is imported.

    With ``simulation.lut_out_of_range: raise``, the LUT lookups the run
    will make for the workload's requests are checked against the grids too
    (see :mod:`simulator.scenario.reach`), once everything else is valid.

    Raises:
        InputError: With every cross-field and referenced-file problem.
    """
    builder = _Builder(document, file, consent or PluginConsent.from_environment())
    profiles = builder.profiles()
    device_ids = {e["id"]: e["type"] for e in document["hardware_profiles"]}
    network = builder.network(device_ids)
    curves = builder.acceptance()
    luts: dict[Path, LutTable | None] = {}
    models = builder.models(curves, luts)
    classes = builder.device_classes(profiles, models)
    builder.kv_guard(classes)
    builder.lut_coverage(classes, models, luts)
    builder.client_links(classes, network)
    speculation = builder.speculation(models, curves)
    scheduler = builder.scheduler(builder.lanes(classes, luts))
    planner = builder.planner()
    metrics = builder.metrics()
    workload = builder.workload([d for d, t in device_ids.items() if t == "draft"])
    manager = LutManager()
    for table in luts.values():
        if table is not None:
            try:
                manager.add(table)
            except InputError as exc:
                builder.issues.extend(exc.issues)
    if builder.issues:
        raise InputError(builder.issues)
    assert workload is not None  # no issues means the workload was built
    scenario = Scenario(
        scenario_id=document["scenario_id"],
        seed=int(document["seed"]),
        source_file=file,
        metadata=builder.metadata(),
        workload=workload,
        network=network,
        devices=tuple(classes),
        speculation=speculation,
        scheduler=scheduler,
        planner=planner,
        metrics=metrics,
        simulation=builder.simulation(),
        luts=manager,
        resolved_json=json.dumps(resolved if resolved is not None else document),
    )
    if scenario.simulation.lut_out_of_range == "raise":
        reach = lut_reach_issues(scenario)
        if reach:
            raise InputError(reach)
    return scenario
