"""Validation of input files of every kind, for ``scripts/validate_scenario.py``.

A file's kind is taken from its extension and top-level keys: ``.csv`` and
``.parquet`` are LUTs; a YAML/JSON mapping with ``scenario_id`` is a scenario,
one with ``role`` and ``hardware`` a device profile, one with ``method`` and
``kind`` an acceptance curve, one with ``scenario`` and ``grid`` or
``points`` a sweep, one with ``scenario`` and ``pools`` or ``speculation`` a
plan space.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simulator.acceptance import load_acceptance_model
from simulator.devices import load_device_profile
from simulator.engine.runtime import build_runtime
from simulator.errors import InputError, make_issue
from simulator.loading import read_document
from simulator.lut import load_lut
from simulator.scenario import load_scenario
from simulator.sweeps.plan_space import load_plan_space
from simulator.sweeps.spec import load_sweep

FileKind = Literal["scenario", "lut", "profile", "acceptance", "sweep", "plan"]
DOCUMENT_SUFFIXES = (".yaml", ".yml", ".json")
LUT_SUFFIXES = (".csv", ".parquet")


@dataclass(frozen=True)
class Verdict:
    """The outcome of validating one file."""

    path: Path
    kind: FileKind | None
    summary: str
    error: InputError | None

    @property
    def ok(self) -> bool:
        """Whether the file is valid."""
        return self.error is None


def detect_kind(path: Path) -> FileKind:
    """Return the kind of input file ``path`` holds.

    Raises:
        InputError: The kind cannot be told.
    """
    suffix = path.suffix.lower()
    if suffix in LUT_SUFFIXES:
        return "lut"
    document = read_document(path)
    if isinstance(document, dict):
        if (
            "scenario" in document
            and "scenario_id" not in document
            and ({"pools", "speculation"} & set(document))
        ):
            return "plan"
        if {"scenario_id", "workload", "hardware_profiles", "speculation"} & set(document):
            return "scenario"
        if "scenario" in document and ({"grid", "points"} & set(document)):
            return "sweep"
        if "role" in document and "hardware" in document:
            return "profile"
        if "method" in document and "kind" in document:
            return "acceptance"
    raise InputError(
        [
            make_issue(
                path,
                "(top level)",
                sorted(document) if isinstance(document, dict) else type(document).__name__,
                "a scenario (scenario_id), sweep (scenario with grid or points), "
                "plan space (scenario with pools or speculation), device profile (role, hardware), "
                "acceptance curve (method, kind) or LUT (.csv/.parquet)",
                "cannot tell what kind of file this is",
            )
        ]
    )


def _count(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


def validate_file(path: Path, kind: FileKind | None = None) -> Verdict:
    """Validate one file with everything it references.

    A scenario goes through the loader ``simulate`` uses and has its run-time
    objects resolved, so every check a run makes before its first event runs.
    """
    try:
        kind = kind or detect_kind(path)
        if kind == "scenario":
            scenario = load_scenario(path)
            build_runtime(scenario)  # what a run resolves before its first event
            summary = (
                f"scenario {scenario.scenario_id}: mode {scenario.speculation.mode}, "
                f"{_count(len(scenario.devices), 'device class', 'device classes')}, "
                f"{_count(len(scenario.luts.keys()), 'LUT key', 'LUT keys')}"
            )
        elif kind == "sweep":
            sweep = load_sweep(path)  # resolves every point
            summary = f"sweep {sweep.sweep_id}: {_count(len(sweep.points), 'point', 'points')}"
        elif kind == "plan":
            space = load_plan_space(path)  # resolves every configuration
            summary = (
                f"plan space {space.plan_id}: "
                f"{_count(len(space.sweep.points), 'configuration', 'configurations')}"
            )
        elif kind == "lut":
            table = load_lut(path)
            summary = f"LUT: {len(table.keys())} keys"
        elif kind == "profile":
            profile = load_device_profile(path)
            summary = f"device profile {profile.id} ({profile.role}, {profile.hardware})"
        else:
            model = load_acceptance_model(path)
            k = 4 if model.max_k is None else min(4, model.max_k)
            temperature = model.temperatures[0]
            measured = ", ".join(
                [
                    model.info.topology.describe(),
                    "temperature " + " / ".join(f"{t:g}" for t in model.temperatures),
                    *(["categories " + " ".join(model.categories)] if model.categories else []),
                ]
            )
            summary = (
                f"acceptance model {model.method} ({measured}): E[tokens/verify] at k={k}"
                f" and temperature {temperature:g} is "
                + format(model.expected_tokens_per_verify(k, 512, temperature), ".3f")
            )
    except InputError as exc:
        return Verdict(path, kind, "", exc)
    return Verdict(path, kind, summary, None)


def expand_paths(paths: Iterable[Path]) -> Iterator[Path]:
    """Yield files, expanding directories to the YAML/JSON files below them (sorted).

    JSON Schemas (``*.schema.json``) and hidden files are skipped.
    """
    for path in paths:
        if path.is_dir():
            yield from sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix.lower() in DOCUMENT_SUFFIXES
                and not p.name.endswith(".schema.json")
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        else:
            yield path
