"""Assembly of the complete scenario JSON Schema.

The packaged ``scenario.schema.json`` leaves three things open: the
``workload`` section (its own file, ``workload.schema.json``),
``hardware_profiles[].availability`` (the device profile schema's
``availability`` block) and the valid values of every ``policy`` key: a
name from the policy registries (built-ins, and entry-point plug-ins unless
asked for the built-ins only) or an import path ``module.path:ClassName``. This
module fills both in, inlines the ``$defs`` so defaults can be filled by a
plain walk (``properties`` written beside a ``$ref`` extend the definition's,
as the verify lane adds ``microbatch`` to the common lane), and returns the
finished schema.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Any

from policies import policy_enums
from policies.plugins import IMPORT_PATH_PATTERN
from simulator.loading import load_packaged_schema

DEFAULT_POLICY: Mapping[str, str] = {
    "prefill_batching": "fcfs",
    "draft_scheduling": "iteration_level",
    "verify_batching": "fcfs",
    "routing": "round_robin",
    "admission": "admit_all",
    "k_control": "static",
    "hybrid_mode": "rtt_threshold",
    "arbitration": "prefill_first",
    "draft_selection": "first",
}
"""The policy each family uses when a scenario names none."""


def _inline_refs(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            ref = node["$ref"]
            prefix = "#/$defs/"
            if not isinstance(ref, str) or not ref.startswith(prefix):
                raise ValueError(f"unsupported $ref {ref!r} in the scenario schema")
            merged = copy.deepcopy(defs[ref[len(prefix) :]])
            for key, value in node.items():
                if key == "properties":
                    # Properties beside a $ref add to (or replace single) definitions' ones.
                    merged.setdefault("properties", {}).update(copy.deepcopy(value))
                elif key != "$ref":
                    merged[key] = value
            return _inline_refs(merged, defs)
        return {k: _inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def _apply_policy_enums(node: Any, enums: Mapping[str, list[str]]) -> None:
    if isinstance(node, dict):
        family = node.get("x-policy-family")
        if isinstance(family, str):
            node["anyOf"] = [
                {"title": "a registered name", "enum": list(enums[family])},
                {"title": "an import path", "type": "string", "pattern": IMPORT_PATH_PATTERN},
            ]
            node.pop("type", None)
        lane_family = node.get("x-lane-family")
        if isinstance(lane_family, str):
            policy = node["properties"]["policy"]
            policy["x-policy-family"] = lane_family
            policy["default"] = DEFAULT_POLICY[lane_family]
            policy["description"] = f"{lane_family} policy."
        for value in node.values():
            _apply_policy_enums(value, enums)
    elif isinstance(node, list):
        for value in node:
            _apply_policy_enums(value, enums)


def _availability_override() -> dict[str, Any]:
    """``hardware_profiles[].availability``: a device profile's availability block, or null."""
    block: dict[str, Any] = load_packaged_schema("device_profile.schema.json")["properties"][
        "availability"
    ]
    block["type"] = ["object", "null"]
    block["default"] = None
    block["description"] = (
        "When the devices of this class can work, replacing the profile's availability "
        "(same keys and rules as the profile's block; null: the profile's). Windows delay the work of "
        "draft devices in modes distributed and hybrid; elsewhere only kind always is accepted."
    )
    return block


@cache
def _assembled(plugins: bool) -> dict[str, Any]:
    schema = load_packaged_schema("scenario.schema.json")
    defs = schema.pop("$defs", {})
    schema = _inline_refs(schema, defs)
    schema["properties"]["workload"] = load_packaged_schema("workload.schema.json")
    entry = schema["properties"]["hardware_profiles"]["items"]["properties"]
    entry["availability"] = _availability_override()
    _apply_policy_enums(schema, policy_enums(plugins))
    result: dict[str, Any] = schema
    return result


def shared_scenario_schema(plugins: bool = True) -> Mapping[str, Any]:
    """Return the complete scenario schema this process built once: to read, never to change.

    Loading a scenario only reads its schema (validation and defaults), so it
    takes this one: deep-copying it cost about a sixth of loading a scenario
    whose files are already cached. :func:`scenario_schema` gives a copy to change.
    """
    return _assembled(plugins)


def scenario_schema(plugins: bool = True) -> dict[str, Any]:
    """Return a fresh copy of the complete scenario schema.

    Args:
        plugins: Let each ``policy`` key name the entry-point plug-ins too
            (loading them); ``False`` lists the built-ins only, as the
            shipped documentation does.
    """
    return copy.deepcopy(_assembled(plugins))
