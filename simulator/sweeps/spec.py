"""Sweep files: a base scenario and the points to run it at, every point resolved up front."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simulator.content_hash import scenario_sha256
from simulator.errors import InputError, Issue, make_issue
from simulator.limits import MAX_SWEEP_POINTS
from simulator.loading import load_packaged_schema, read_document, resolve_path, schema_issues
from simulator.scenario.load import load_scenario
from simulator.scenario.model import Scenario
from simulator.scenario.overrides import owning_override

SWEEP_SCHEMA = "sweep.schema.json"


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep.

    Attributes:
        index: Position of the point in the sweep (0-based); rows are sorted by it.
        values: Dotted key -> value of this point (its axes' values).
        scenario: The base scenario with ``set`` and ``values`` applied.
        sha256: Content hash of the resolved scenario (see
            :func:`~simulator.content_hash.scenario_sha256`).
    """

    index: int
    values: Mapping[str, Any]
    scenario: Scenario
    sha256: str


@dataclass(frozen=True)
class Sweep:
    """A loaded sweep file.

    Attributes:
        sweep_id: Name of the sweep.
        source_file: The sweep file (``None`` when built in Python).
        scenario_file: The base scenario file.
        axes: Every dotted key a point sets, in first-seen order (the table's axis columns).
        points: The resolved points, in order.
    """

    sweep_id: str
    source_file: Path | None
    scenario_file: Path
    axes: tuple[str, ...]
    points: tuple[SweepPoint, ...]


def override_text(key: str, value: Any) -> str:
    """Render ``key=value`` for :func:`~simulator.scenario.overrides.apply_overrides`.

    The value is written as JSON, which reads back as the same YAML value.
    """
    return f"{key}={json.dumps(value, allow_nan=False)}"


def _point_values(
    document: Mapping[str, Any],
) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """Return (location, values) of every point and the axis keys in first-seen order."""
    if "grid" in document:
        grid: Mapping[str, list[Any]] = document["grid"]
        keys = list(grid)
        combos = itertools.product(*(grid[k] for k in keys))
        return [("grid", dict(zip(keys, combo, strict=True))) for combo in combos], keys
    points: list[dict[str, Any]] = document["points"]
    axes: dict[str, None] = {}
    for point in points:
        axes.update(dict.fromkeys(point))
    return [(f"points[{i}]", dict(p)) for i, p in enumerate(points)], list(axes)


def _size_issues(file: Path, document: Mapping[str, Any]) -> list[Issue]:
    """Refuse more points than :data:`~simulator.limits.MAX_SWEEP_POINTS` (before any is loaded)."""
    if "grid" in document:
        lengths = [len(values) for values in document["grid"].values()]
        count, key = math.prod(lengths), "grid"
        value = " x ".join(str(n) for n in lengths) + f" = {count:,} points"
    else:
        count, key = len(document["points"]), "points"
        value = f"{count:,} points"
    if count <= MAX_SWEEP_POINTS:
        return []
    return [
        make_issue(
            file,
            key,
            value,
            f"at most {MAX_SWEEP_POINTS:,} points per sweep (each is loaded before any runs, "
            "then run; split a larger study into several sweeps)",
            "too many points",
        )
    ]


def _rewrap(issue: Issue, file: str, location: str, values: Mapping[str, Any]) -> Issue:
    """An issue of one point's scenario, re-addressed to the sweep file and the point."""
    point = ", ".join(f"{k}={json.dumps(v)}" for k, v in values.items())
    where = issue.key_path or "(top level)"
    return Issue(
        file,
        f"{location} ({point}) -> {issue.file}: {where}",
        issue.value,
        issue.allowed,
        issue.problem,
    )


def _set_issue(
    issue: Issue, file: str, scenario_file: Path, overrides: list[str], set_keys: Mapping[str, str]
) -> Issue | None:
    """An issue a ``set`` entry owns, re-addressed to that entry (once, not per point), or None.

    ``overrides`` are a point's, ``set`` first; ``set_keys`` maps the text of
    each ``set`` override to its key in the sweep file.
    """
    owner = owning_override(issue, scenario_file, overrides)
    if owner is None or owner[1] not in set_keys:
        return None
    key, text = owner
    where = f"set.{set_keys[text]}"
    if issue.key_path != key and issue.key_path.startswith((f"{key}.", f"{key}[")):
        where += f" ({issue.key_path})"
    return replace(issue, file=file, key_path=where)


def build_sweep(
    document: Any,
    source_file: Path | None,
    base_dir: Path,
    default_id: str,
) -> Sweep:
    """Validate a sweep document and resolve every point (nothing runs).

    Args:
        document: The parsed sweep file (or a mapping built in Python).
        source_file: The sweep file, for messages (``None``: built in Python).
        base_dir: What a relative ``scenario`` path resolves against.
        default_id: The sweep's name when ``sweep_id`` is not given.

    Raises:
        InputError: The document breaks the schema, has both or neither of
            ``grid`` and ``points``, or a point's scenario does not load (every
            axis key and value is checked by loading every point).
    """
    file = source_file if source_file is not None else Path("(sweep)")
    if not isinstance(document, dict):
        raise InputError([make_issue(file, "(top level)", document, "a mapping", "not a mapping")])
    issues = schema_issues(document, load_packaged_schema(SWEEP_SCHEMA), file)
    if not issues and ("grid" in document) == ("points" in document):
        issues.append(
            make_issue(
                file,
                "grid / points",
                sorted(k for k in ("grid", "points") if k in document),
                "exactly one of grid (every combination of the axes) or points (a list)",
                "both given" if "grid" in document else "neither given",
            )
        )
    if not issues:
        issues = _size_issues(file, document)
    if issues:
        raise InputError(issues)
    scenario_file = resolve_path(base_dir, document["scenario"])
    fixed = [override_text(k, v) for k, v in document.get("set", {}).items()]
    set_keys = dict(zip(fixed, document.get("set", {}), strict=True))
    located, axes = _point_values(document)
    points: list[SweepPoint] = []
    problems: dict[Issue, None] = {}
    for index, (location, values) in enumerate(located):
        overrides = [*fixed, *(override_text(k, v) for k, v in values.items())]
        try:
            scenario = load_scenario(scenario_file, overrides=overrides)
        except InputError as exc:
            problems.update(
                dict.fromkeys(
                    _set_issue(i, str(file), scenario_file, overrides, set_keys)
                    or _rewrap(i, str(file), location, values)
                    for i in exc.issues
                )
            )
            continue
        points.append(SweepPoint(index, values, scenario, scenario_sha256(scenario)))
    if problems:
        raise InputError(problems)
    return Sweep(
        sweep_id=str(document.get("sweep_id", default_id)),
        source_file=source_file,
        scenario_file=scenario_file,
        axes=tuple(axes),
        points=tuple(points),
    )


def load_sweep(sweep: str | Path | Mapping[str, Any] | Sweep) -> Sweep:
    """Load a sweep file, or build a sweep from a mapping in its format.

    A mapping's relative ``scenario`` path resolves against the working
    directory; a file's against the file's folder.

    Raises:
        InputError: See :func:`build_sweep`.
    """
    if isinstance(sweep, Sweep):
        return sweep
    if isinstance(sweep, Mapping):
        return build_sweep(dict(sweep), None, Path(), "sweep")
    file = Path(sweep)
    return build_sweep(read_document(file, "sweep"), file, file.parent, file.stem)
