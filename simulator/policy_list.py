"""``simulate policies``: every policy family, its policies and their parameters.

Built-ins and the plug-ins of installed distributions (entry point group
``specdec_sim.policies``) are listed; a class a scenario names by import path
is not registered anywhere, so it cannot be listed. Families and policies
come in name order, parameters in their schema's order, so the output is the
same on every run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from policies.registry import families
from simulator.errors import raise_if_any
from simulator.loading import bounds_text
from simulator.scenario.load import plugin_issues


def _type_text(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind)
    bounds = bounds_text(schema)
    return f"{text} {' and '.join(bounds)}" if bounds else text


def _parameters(params_schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    required = set(params_schema.get("required", []))
    out: list[dict[str, Any]] = []
    for name, sub in params_schema.get("properties", {}).items():
        entry: dict[str, Any] = {
            "name": name,
            "type": _type_text(sub),
            "required": name in required,
            "description": str(sub.get("description", "")),
        }
        if "default" in sub:
            entry["default"] = sub["default"]
        out.append(entry)
    return out


def policy_listing() -> list[dict[str, Any]]:
    """Return every family with its policies (name, origin, parameters), in name order.

    Raises:
        InputError: A plug-in entry point of the environment is broken.
    """
    registries = families()
    raise_if_any(plugin_issues())
    listing: list[dict[str, Any]] = []
    for family in sorted(registries):
        reg = registries[family]
        policies = [
            {
                "name": name,
                "origin": reg.origin(name),
                "parameters": _parameters(reg.get(name).params_schema),
            }
            for name in reg.names()
        ]
        listing.append({"family": family, "description": reg.description, "policies": policies})
    return listing


def render_listing(listing: list[dict[str, Any]]) -> str:
    """Return the listing as plain text, one block per family."""
    lines: list[str] = []
    for family in listing:
        if lines:
            lines.append("")
        lines.append(f"{family['family']}: {family['description']}")
        for policy in family["policies"]:
            lines.append(f"  {policy['name']}  ({policy['origin']})")
            if not policy["parameters"]:
                lines.append("    no parameters")
            for param in policy["parameters"]:
                if param["required"]:
                    default = "required"
                elif "default" in param:
                    default = f"default {json.dumps(param['default'])}"
                else:
                    default = "optional"
                text = f"    {param['name']}: {param['type']}, {default}"
                if param["description"]:
                    text += f". {param['description']}"
                lines.append(text)
    return "\n".join(lines)
