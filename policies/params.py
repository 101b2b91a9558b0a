"""Policy parameters, declared once: dataclass fields that carry their JSON Schema facts.

A policy's ``Params`` is a frozen dataclass. Each field is declared with
:func:`param`, which keeps the facts a scenario's ``params`` mapping is
checked against (bounds, allowed values, a description) in the field's
``metadata``; its type comes from the field's annotation and its default
from the field's default. :func:`params_schema_of` derives the JSON Schema
of the whole mapping from the dataclass, so ``params_schema`` is never
written by hand for a built-in policy (a plug-in may still write its own).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

SCHEMA_KEY = "params_schema"
"""The key of a field's ``metadata`` that holds its JSON Schema facts."""

_JSON_TYPES: Mapping[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}

_FACT_ORDER = ("type", "enum", "minimum", "exclusiveMinimum", "maximum", "minLength")
"""The order of a property's keys in the derived schema (then ``default``, ``description``)."""


def param(
    default: Any = dataclasses.MISSING,
    *,
    description: str | None = None,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
    min_length: int | None = None,
    enum: tuple[Any, ...] | None = None,
) -> Any:
    """Declare one parameter: a dataclass field with its JSON Schema facts.

    Args:
        default: The value when a scenario leaves the parameter out; without
            one the parameter is required.
        description: What the parameter means (shown by ``simulate policies``).
        minimum: Smallest value allowed.
        exclusive_minimum: Every value must be above this.
        maximum: Largest value allowed.
        min_length: Shortest string allowed.
        enum: The only values allowed (the property then has no ``type``).
    """
    facts: dict[str, Any] = {}
    if enum is not None:
        facts["enum"] = list(enum)
    for key, value in (
        ("minimum", minimum),
        ("exclusiveMinimum", exclusive_minimum),
        ("maximum", maximum),
        ("minLength", min_length),
    ):
        if value is not None:
            facts[key] = value
    if description is not None:
        facts["description"] = description
    metadata = {SCHEMA_KEY: facts}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _json_type(annotation: Any, where: str) -> str | list[str]:
    """The JSON Schema ``type`` of a field annotated ``annotation`` (``X | None`` adds null)."""
    if annotation in _JSON_TYPES:
        return _JSON_TYPES[annotation]
    args = typing.get_args(annotation)
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    if union and len(args) == 2 and type(None) in args:
        member = args[0] if args[1] is type(None) else args[1]
        if member in _JSON_TYPES:
            return [_JSON_TYPES[member], "null"]
    raise TypeError(f"{where}: no JSON type for the annotation {annotation!r}")


def params_schema_of(params: type[Any]) -> dict[str, Any]:
    """Derive the JSON Schema of a ``params`` mapping from the ``Params`` dataclass.

    Properties come in field order; a field without a default is required.
    A field declared without :func:`param` gets its type (and default) only.

    Raises:
        TypeError: ``params`` is not a dataclass, or a field's annotation has
            no JSON type (and the field has no ``enum``).
    """
    if not (isinstance(params, type) and dataclasses.is_dataclass(params)):
        raise TypeError(f"{params!r} is not a dataclass")
    hints = typing.get_type_hints(params)
    required: list[str] = []
    properties: dict[str, Any] = {}
    for field in dataclasses.fields(params):
        facts: Mapping[str, Any] = field.metadata.get(SCHEMA_KEY, {})
        merged = dict(facts)
        if "enum" not in facts:
            merged["type"] = _json_type(hints[field.name], f"{params.__qualname__}.{field.name}")
        prop = {key: merged[key] for key in _FACT_ORDER if key in merged}
        if field.default is not dataclasses.MISSING:
            prop["default"] = field.default
        elif field.default_factory is dataclasses.MISSING:
            required.append(field.name)
        if "description" in facts:
            prop["description"] = facts["description"]
        properties[field.name] = prop
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if required:
        schema["required"] = required
    schema["properties"] = properties
    return schema


class DerivedParamsSchema:
    """A class attribute whose value is the JSON Schema derived from the class's ``Params``.

    Computed once per ``Params`` class, on first access.
    """

    def __init__(self) -> None:
        self._by_params: dict[type[Any], dict[str, Any]] = {}

    def __get__(self, instance: object, owner: type[Any]) -> dict[str, Any]:
        params: type[Any] = owner.Params
        schema = self._by_params.get(params)
        if schema is None:
            schema = self._by_params[params] = params_schema_of(params)
        return schema


@dataclasses.dataclass(frozen=True)
class NoParams:
    """Parameters of a policy that has none."""
