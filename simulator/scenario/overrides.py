"""``--set dotted.key=value`` overrides applied to a scenario document before validation.

A problem with an override is reported as the option's, ``--set TEXT``: one
that cannot be applied by :func:`apply_overrides`, and (through
:func:`blame_overrides`, which the commands call) one the scenario's
validation finds at or below a key an override set, such as
``--set workload.arrival_scale=x: wrong type (got 'x'; allowed: number > 0)``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from simulator.errors import InputError, Issue, describe_value, key_path, make_issue
from simulator.loading import BOUNDED_YAML, YamlBoundError, load_yaml

OVERRIDE_SOURCE = "--set"


def override_source(text: str) -> str:
    """Where an override's problems are reported: the option with its text (``--set a.b=1``)."""
    return f"{OVERRIDE_SOURCE} {text}"


def parse_override(text: str) -> tuple[list[str | int], Any]:
    """Split ``a.b[0].c=value`` (or ``a.b.0.c=value``) into a path and a YAML-parsed value.

    The value is read like a scenario file's (see :func:`~simulator.loading.load_yaml`).

    Raises:
        ValueError: The text has no ``=`` or an empty key.
    """
    if "=" not in text:
        raise ValueError("expected KEY=VALUE")
    key, raw_value = text.split("=", 1)
    key = key.strip().replace("[", ".").replace("]", "")
    if not key or any(not part for part in key.split(".")):
        raise ValueError("expected a dotted key such as scheduler.verify.batching.max_batch")
    path: list[str | int] = [int(p) if p.isdigit() else p for p in key.split(".")]
    value = load_yaml(raw_value) if raw_value.strip() else ""
    return path, value


def apply_overrides(document: Any, overrides: Sequence[str]) -> Any:
    """Return a copy of ``document`` with every override applied.

    Mappings along the path are created when missing; list indices must exist.

    Raises:
        InputError: With one issue per override that cannot be applied.
    """
    result = copy.deepcopy(document)
    issues: list[Issue] = []
    for text in overrides:
        try:
            path, value = parse_override(text)
        except ValueError as exc:
            issues.append(
                make_issue(override_source(text), "", text, "KEY=VALUE with a dotted key", str(exc))
            )
            continue
        except yaml.YAMLError as exc:
            allowed = BOUNDED_YAML if isinstance(exc, YamlBoundError) else "valid YAML"
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            issues.append(
                make_issue(override_source(text), "", text, f"KEY=VALUE with {allowed}", problem)
            )
            continue
        problem = _set_path(result, path, value)
        if problem:
            issues.append(make_issue(override_source(text), "", text, *problem))
    if issues:
        raise InputError(issues)
    return result


def blame_overrides(
    issues: Sequence[Issue], file: str | Path, overrides: Sequence[str]
) -> list[Issue]:
    """Re-address the scenario file's issues that lie at or below a key an override set.

    Such an issue is reported as the last override that set the key (or a key
    above it), ``--set TEXT``, with the issue's key path kept only where it
    lies below the key the override names. Other issues are returned as they
    are; an override that does not parse owns none (:func:`apply_overrides`
    reports it).
    """
    out: list[Issue] = []
    for issue in issues:
        owner = owning_override(issue, file, overrides)
        if owner is None:
            out.append(issue)
            continue
        key, text = owner
        below = "" if issue.key_path == key else issue.key_path
        out.append(replace(issue, file=override_source(text), key_path=below))
    return out


def owning_override(
    issue: Issue, file: str | Path, overrides: Sequence[str]
) -> tuple[str, str] | None:
    """Return ``(key, text)`` of the last override that owns an issue of the scenario ``file``.

    An override owns the issues at or below the key it sets, and one about the
    name of a key above it that it brought in (see :func:`blame_overrides`).
    ``key`` is the override's key path as issues write it (``a.b[0].c``).
    """
    if issue.file != str(Path(file)):
        return None
    for text in reversed(overrides):
        try:
            key = key_path(parse_override(text)[0])
        except (ValueError, yaml.YAMLError):
            continue
        if _owns(key, issue):
            return key, text
    return None


def _owns(key: str, issue: Issue) -> bool:
    """Whether the override of ``key`` owns ``issue``.

    It does when the issue lies at or below ``key``, or when it is about the
    name of a key above ``key`` that the override brought in (``--set
    bogus.key=1`` makes a mapping ``bogus``, refused as an unknown key).
    """
    at = issue.key_path
    if at == key or at.startswith((f"{key}.", f"{key}[")):
        return True
    if not at or not key.startswith((f"{at}.", f"{at}[")):
        return False
    name = at.rsplit(".", 1)[-1]
    return "[" not in name and issue.value == describe_value(name)


def _set_path(node: Any, path: list[str | int], value: Any) -> tuple[str, str] | None:
    """Set ``value`` at ``path``; return ``(allowed, problem)`` when impossible."""
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, dict):
            key = str(part)
            if last:
                node[key] = value
                return None
            if key not in node or node[key] is None:
                node[key] = {}
            node = node[key]
        elif isinstance(node, list):
            if not isinstance(part, int) or part >= len(node):
                return (f"an index from 0 to {len(node) - 1}", "no such list item")
            if last:
                node[part] = value
                return None
            node = node[part]
        else:
            return ("a path through mappings and lists", "cannot descend into a scalar")
    return ("a non-empty key", "empty key")
