"""What differs between the resolved scenarios of the runs of a comparison.

Each run's ``scenario.resolved.yaml`` is flattened into dotted keys
(``workload.arrival_scale``, ``hardware_profiles[a100_pool].count``); a key
is listed where its value is not the same in every run, or where some run
lacks it. Lists of mappings that each carry a distinct ``id`` or ``name`` are
keyed by it (so reordering them is no difference), other lists of mappings
by position; a list of plain values is one value. An empty mapping or list
has no keys, so a run where it is empty reads "(not set)" beside a run that
fills it. Keys that say nothing about what was simulated are left out (see
:data:`IGNORED_KEYS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

IGNORED_KEYS = ("metadata", "metrics.output_dir")
"""Keys (and everything under them) left out of the comparison.

``metadata`` (label, description, references) names and explains a run
without changing it, and the report lists it already; ``metrics.output_dir``
is where a run was written. Every other key, file paths included, is
compared: two runs reading different traces or lookup tables differ.
"""

NOT_SET = "(not set)"
"""Cell of a run whose resolved scenario lacks the key (or has an empty mapping or list above it)."""

LIST_KEYS = ("id", "name")
"""Fields that name the entries of a list of mappings, in order of preference."""


def _list_key(items: Sequence[Any]) -> str | None:
    """The field whose values name every entry of ``items`` distinctly, if any."""
    if not items or not all(isinstance(item, Mapping) for item in items):
        return None
    for field in LIST_KEYS:
        names = [item.get(field) for item in items]
        if all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
            return field
    return None


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``value`` as ``{dotted key: leaf value}``.

    Mappings nest as ``a.b``; a list of mappings nests by its entries' ``id``
    or ``name`` (``a[x].b``), or else by position (``a[0].b``); an empty
    mapping or list has no keys; any other list is one value.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and all(isinstance(item, Mapping) for item in value):
        field = _list_key(value)
        out = {}
        for position, item in enumerate(value):
            if field is None:
                out.update(flatten(item, f"{prefix}[{position}]"))
            else:
                rest = {k: v for k, v in item.items() if k != field}
                out.update(flatten(rest, f"{prefix}[{item[field]}]"))
        return out
    return {prefix: value}


def _ignored(key: str) -> bool:
    return any(
        key == ignored or key.startswith((f"{ignored}.", f"{ignored}[")) for ignored in IGNORED_KEYS
    )


def format_value(value: Any) -> str:
    """A value as the resolved YAML spells it (``null``, ``true``, ``[2, 4]``, ``{}``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{key}: {format_value(item)}" for key, item in value.items())
        return "{" + inner + "}"
    return str(value)


def scenario_differences(scenarios: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per differing key: the key, then its value in each scenario (in order).

    Rows follow the order keys first appear in the scenarios; a scenario
    without the key reads :data:`NOT_SET`.
    """
    flat = [flatten(scenario) for scenario in scenarios]
    keys: dict[str, None] = {}
    for one in flat:
        keys.update(dict.fromkeys(key for key in one if not _ignored(key)))
    rows = []
    missing = object()
    for key in keys:
        values = [one.get(key, missing) for one in flat]
        if all(value == values[0] for value in values[1:]):
            continue
        rows.append([key, *(NOT_SET if v is missing else format_value(v) for v in values)])
    return rows
