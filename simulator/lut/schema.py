"""The columns of a LUT file, as the packaged JSON Schema ``lut.schema.json`` defines them.

The schema describes one row. The loader does not validate rows one by one
with jsonschema (too slow for large tables); it reads the column list, types,
enums and minimums from the schema into :class:`ColumnRule` records and checks
whole columns at once. The roles of the columns (which ones form the key of a
grid, which ones are its axes and which ones are the looked-up values) are
fixed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from simulator.limits import LUT_MAXIMA, MAX_LUT_WHOLE_NUMBER
from simulator.loading import load_packaged_schema

SCHEMA_NAME = "lut.schema.json"
"""File name of the packaged schema of one LUT row."""

KEY_COLUMNS: tuple[str, ...] = (
    "phase",
    "model",
    "hardware",
    "tensor_parallel",
    "pipeline_parallel",
    "dtype",
)
"""Columns that select one grid: every distinct combination is one :class:`~simulator.lut.LutKey`."""

AXIS_COLUMNS: tuple[str, ...] = ("context_len", "microbatch", "fanout_k")
"""Columns spanning a grid, in interpolation order."""

VALUE_COLUMNS: tuple[str, ...] = ("latency_ms", "energy_mj", "peak_mem_mb", "kv_delta_mb")
"""Columns looked up and interpolated, in the order of :class:`~simulator.lut.LutResult`."""

SINGLE_FANOUT_PHASES: frozenset[str] = frozenset({"prefill", "draft_decode"})
"""Phases whose rows must have ``fanout_k`` = 1."""

ColumnKind = Literal["enum", "string", "integer", "number"]


@dataclass(frozen=True)
class ColumnRule:
    """What one LUT column accepts.

    Attributes:
        name: Column name.
        kind: ``enum`` (one of ``choices``), ``string`` (text), ``integer``
            (a whole number) or ``number`` (a finite real number).
        required: Whether the column must be present and every cell filled.
        minimum: Smallest allowed value of a numeric column, if any.
        maximum: Largest allowed value of a numeric column, if any (from
            :mod:`simulator.limits`, not the schema).
        min_length: Smallest allowed length of a text cell.
        choices: Allowed values of an ``enum`` column.
        default: Value of an optional column when it is absent or a cell is empty.
        description: The schema's description of the column.
    """

    name: str
    kind: ColumnKind
    required: bool
    minimum: float | None
    min_length: int
    choices: tuple[str, ...]
    default: str
    description: str
    maximum: float | None = None

    def allowed(self) -> str:
        """Describe the accepted values, for the ``allowed`` part of an issue."""
        if self.kind == "enum":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "string":
            return "non-empty text" if self.min_length > 0 else "any text"
        text = "a whole number" if self.kind == "integer" else "a finite number"
        if self.minimum is not None:
            text += f" >= {self.minimum:g}"
        if self.maximum is not None:
            bound = f"{self.maximum:,.0f}" if self.kind == "integer" else f"{self.maximum:g}"
            text += (" and" if self.minimum is not None else "") + f" <= {bound}"
        return text


def _rule(name: str, spec: dict[str, Any], required: bool) -> ColumnRule:
    kind: ColumnKind
    if "enum" in spec:
        kind = "enum"
    elif spec.get("type") == "integer":
        kind = "integer"
    elif spec.get("type") == "number":
        kind = "number"
    else:
        kind = "string"
    minimum = spec.get("minimum")
    return ColumnRule(
        name=name,
        kind=kind,
        required=required,
        minimum=float(minimum) if minimum is not None else None,
        min_length=int(spec.get("minLength", 0)),
        choices=tuple(str(c) for c in spec.get("enum", ())),
        default=str(spec.get("default", "")),
        description=str(spec.get("description", "")),
        maximum=float(MAX_LUT_WHOLE_NUMBER) if kind == "integer" else LUT_MAXIMA.get(name),
    )


@cache
def column_rules() -> tuple[ColumnRule, ...]:
    """Return the rules of every LUT column, in the schema's order."""
    schema = load_packaged_schema(SCHEMA_NAME)
    required = set(schema["required"])
    return tuple(_rule(name, spec, name in required) for name, spec in schema["properties"].items())


def column_names() -> tuple[str, ...]:
    """Return every column name a LUT file may have, in the schema's order."""
    return tuple(rule.name for rule in column_rules())


def choices_of(column: str) -> tuple[str, ...]:
    """Return the allowed values of an enum column (e.g. ``phase`` or ``dtype``)."""
    for rule in column_rules():
        if rule.name == column:
            return rule.choices
    raise KeyError(f"no LUT column {column!r}")
