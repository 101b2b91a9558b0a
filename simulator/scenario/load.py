"""The scenario pipeline: file → overrides → schema → defaults → cross-checks → frozen objects."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from policies.plugins import (
    ALLOW_PLUGINS_ENV,
    ENTRY_POINT_GROUP,
    PluginConsent,
    environment_problems,
    load_entry_points,
)
from simulator.builtin_data import is_builtin
from simulator.devices import is_engine_path
from simulator.errors import InputError, Issue, make_issue
from simulator.loading import fill_defaults, read_document, resolve_path, schema_issues
from simulator.scenario.build import build_scenario
from simulator.scenario.model import Scenario
from simulator.scenario.overrides import apply_overrides
from simulator.scenario.schema import shared_scenario_schema


def load_scenario(
    path: str | Path,
    overrides: Sequence[str] = (),
    seed: int | None = None,
    *,
    allow_plugins: Iterable[str] = (),
) -> Scenario:
    """Load, validate and build a scenario file (YAML or JSON).

    Args:
        path: The scenario file; paths inside it resolve against its folder.
        overrides: ``dotted.key=value`` strings applied before validation.
        seed: Replaces the scenario's ``seed`` when given (``--seed``; refused
            as the command line's when it is not an integer >= 0).
        allow_plugins: Modules (and the modules inside them) a policy named
            by import path may come from, besides those the environment
            variable ``SPECDEC_ALLOW_PLUGINS`` names. Any other import path
            is refused before anything is imported.

    Raises:
        InputError: With every problem found in the scenario and the files it
            references.
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise InputError([make_issue("command line", "--seed", seed, "an integer >= 0")])
    file = Path(path)
    document = read_document(file, "scenario")
    if not isinstance(document, dict):
        raise InputError(
            [
                make_issue(
                    file, "(top level)", document, "a mapping of scenario keys", "not a mapping"
                )
            ]
        )
    document = apply_overrides(document, overrides)
    if seed is not None:
        document["seed"] = seed
    schema = shared_scenario_schema()
    issues = [*consent_issues(), *plugin_issues(), *schema_issues(document, schema, file)]
    if issues:
        raise InputError(issues)
    filled = fill_defaults(document, schema)
    consent = PluginConsent.from_environment(allow_plugins)
    return build_scenario(filled, file, resolved=absolute_paths(filled, file), consent=consent)


def consent_issues() -> list[Issue]:
    """Return one issue per part of ``SPECDEC_ALLOW_PLUGINS`` that is not a module name."""
    return [
        make_issue(
            "environment",
            ALLOW_PLUGINS_ENV,
            part,
            "comma-separated module names, e.g. mypkg,other.policies",
            "not a module name",
        )
        for part in environment_problems()
    ]


def plugin_issues() -> list[Issue]:
    """Return one issue per broken policy plug-in entry point of the environment.

    A broken plug-in stops every scenario, as a clash between built-ins would:
    the issue names the distribution and the entry point.
    """
    return [
        make_issue(
            f"distribution {p.distribution}",
            f"entry point {p.entry_point} (group {ENTRY_POINT_GROUP})",
            p.value,
            p.allowed,
            p.problem,
        )
        for p in load_entry_points()
    ]


PATH_LISTS = {
    "drafter_models": "lut",
    "verifier_models": "lut",
    "fused_models": "lut",
    "acceptance_models": "file",
}
TRACE_PREFIX = "trace://"


def _absolute(value: str, base: Path) -> str:
    if value.startswith(TRACE_PREFIX):
        return TRACE_PREFIX + _absolute(value[len(TRACE_PREFIX) :], base)
    if is_builtin(value):  # names the same shipped file from anywhere
        return value
    path = resolve_path(base, value)
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # a symlink loop: the loaders report it
        return str(path.absolute())


def absolute_paths(document: dict[str, Any], file: Path) -> dict[str, Any]:
    """Return a copy of a filled scenario with every file path made absolute.

    The resolved scenario written next to a run's results must rerun from
    there, so relative paths (which resolve against the scenario's folder)
    are rewritten.
    """
    base = file.parent
    return map_file_references(document, lambda value: _absolute(value, base))


def file_references(document: dict[str, Any]) -> list[str]:
    """Every file path value of a filled scenario, in document order.

    Device profiles, LUTs, acceptance files and traces (``trace://`` kept);
    of a resolved scenario they are absolute or ``builtin:`` references.
    """
    found: list[str] = []

    def keep(value: str) -> str:
        found.append(value)
        return value

    map_file_references(document, keep)
    return found


def map_file_references(document: dict[str, Any], rewrite: Callable[[str], str]) -> dict[str, Any]:
    """Return a copy of a filled scenario with every file path value passed through ``rewrite``."""
    out = copy.deepcopy(document)
    for entry in out["hardware_profiles"]:
        entry["profile"] = rewrite(entry["profile"])
        if entry.get("engine") is not None and is_engine_path(entry["engine"]):
            entry["engine"] = rewrite(entry["engine"])
    spec = out["speculation"]
    for list_key, field in PATH_LISTS.items():
        for entry in spec.get(list_key, []):
            entry[field] = rewrite(entry[field])
    lanes = out.get("scheduler", {}).get("lanes", {})
    for role in ("drafter", "verifier"):
        if isinstance(lanes.get(role), dict) and "lut" in lanes[role]:
            lanes[role]["lut"] = rewrite(lanes[role]["lut"])
    tree = spec.get("tree")
    if isinstance(tree, dict):
        for role in ("drafter", "verifier"):
            if isinstance(tree.get(role), dict) and "lut" in tree[role]:
                tree[role]["lut"] = rewrite(tree[role]["lut"])
    _rewrite_workload(out["workload"], rewrite)
    return out


def _rewrite_workload(node: Any, rewrite: Callable[[str], str]) -> None:
    """Rewrite ``source: trace://...`` and every ``trace:`` path inside the workload section."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and (
                (key == "source" and value.startswith(TRACE_PREFIX)) or key == "trace"
            ):
                node[key] = rewrite(value)
            else:
                _rewrite_workload(value, rewrite)
    elif isinstance(node, list):
        for value in node:
            _rewrite_workload(value, rewrite)
