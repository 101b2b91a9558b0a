"""Sanity checks of the LUT files on disk (``python -m lut_population check``).

1. The files are exactly what a fresh build produces (byte for byte), the
   catalog included; LUT files the plan does not produce are listed.
2. Every file loads with the simulator's LUT loader (schema, rectangular grids).
3. Latency is non-decreasing in context_len, in microbatch and in fanout_k;
   in the files built from measurements (``lut/microbench/``) a step down is
   accepted up to the measurements' repeatability (the largest disagreement
   of two H100s at the same point, :func:`lut_population.measured.repeatability`);
   in the files priced by DistServe's fits (:mod:`lut_population.distserve_fit`)
   the decode step down between ``threshold - 1`` and ``threshold`` sequences,
   where DistServe's estimator switches from its small-batch to its large-batch
   fit, is accepted (and listed); each side must be non-decreasing.
4. ``kv_delta_mb`` matches the model shape: tokens appended x 2 x layers x
   kv_heads x head_dim x 2 bytes (target and draft for fused files).
5. Spot checks against published figures (:mod:`lut_population.spot_checks`).
6. The H100 LUTs of measured models against the H100 measurements
   (:mod:`lut_population.measured_check`).
7. Draft-head rows against the H100 head measurements
   (:mod:`lut_population.head_spot_checks`).
8. Target verify rows at ``fanout_k = T - 1`` against the H100 token-tree
   verifies with a tree mask (:mod:`lut_population.tree_spot_checks`).
9. CodeLlama-34B's roofline-priced decode step against ML.ENERGY v2's time
   per output token, relative to the same ratio of profiled models
   (:mod:`lut_population.v2_checks`).
"""

from __future__ import annotations

from collections.abc import Sequence, Sized
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lut_population.build import BuiltFile, build_tables
from lut_population.catalog import render_catalog
from lut_population.distserve_fit import distserve_fit, engine_of
from lut_population.head_spot_checks import (
    HEAD_MEDIAN_TOLERANCE,
    HEAD_POINT_TOLERANCE,
    HeadSummary,
    head_points,
    head_summaries,
    head_table,
)
from lut_population.heads import shapes_with_heads
from lut_population.measured import repeatability
from lut_population.measured_check import MICROBENCH_DIR, TOLERANCES, compare_dir, render
from lut_population.paths import CATALOG_NAME
from lut_population.spot_checks import SPOT_TOLERANCE, spot_checks
from lut_population.tree_spot_checks import tree_points, tree_summaries, tree_table
from lut_population.v2_checks import tpot_check, tpot_lines
from simulator.errors import InputError
from simulator.lut import load_lut

KV_TOLERANCE = 1e-5
"""Relative tolerance of the KV check (values are written with six significant digits)."""

KEY = ["phase", "model", "hardware", "tensor_parallel", "pipeline_parallel", "dtype"]


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check.

    Attributes:
        name: The check.
        ok: Whether it passed.
        details: Lines explaining failures (and, for spot checks, every comparison).
    """

    name: str
    ok: bool
    details: tuple[str, ...] = ()


def check_up_to_date(lut_dir: Path, built: tuple[BuiltFile, ...]) -> CheckResult:
    """Files on disk equal a fresh build."""
    problems = []
    expected = {b.spec.name: b.text for b in built}
    expected[CATALOG_NAME] = render_catalog(built)
    for name, text in sorted(expected.items()):
        path = lut_dir / name
        if not path.is_file():
            problems.append(f"{name}: missing (run python -m lut_population build)")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{name}: differs from a fresh build")
    on_disk = (p.relative_to(lut_dir).as_posix() for p in lut_dir.rglob("*.csv"))
    extra = sorted(name for name in on_disk if name not in expected)
    details = [
        *problems,
        *(f"{name}: not produced by the generator (left alone)" for name in extra),
    ]
    return CheckResult("files match a fresh build", not problems, tuple(details))


def check_loadable(lut_dir: Path, names: list[str]) -> CheckResult:
    """Every file loads with :func:`simulator.lut.load_lut`."""
    problems = []
    for name in names:
        try:
            load_lut(lut_dir / name, use_cache=False)
        except InputError as error:
            problems.append(f"{name}: {error.render()}")
    return CheckResult("files load with simulator.lut", not problems, tuple(problems))


def _frames(lut_dir: Path, names: list[str]) -> dict[str, pd.DataFrame]:
    return {
        name: pd.read_csv(lut_dir / name, keep_default_na=False)
        for name in names
        if (lut_dir / name).is_file()
    }


def _drops(name: str, frame: pd.DataFrame, factor: float) -> list[str]:
    """Every step where latency falls by more than ``factor`` (``prev / next > factor``)."""
    found = []
    axes = ("context_len", "microbatch", "fanout_k")
    for key, group in frame.groupby(KEY, sort=True):
        for axis in axes:
            others = [a for a in axes if a != axis]
            ordered = group.sort_values([*others, axis])
            latency = ordered["latency_ms"].to_numpy(dtype=float)
            same = (ordered[others].to_numpy()[1:] == ordered[others].to_numpy()[:-1]).all(axis=1)
            drops = same & (latency[1:] * factor < latency[:-1])
            for index in np.flatnonzero(drops):
                at = ordered.iloc[int(index) + 1]
                found.append(
                    f"{name} {key[0]} TP{key[3]}: latency falls along {axis} at "
                    f"context {at['context_len']}, batch {at['microbatch']}, "
                    f"k {at['fanout_k']} (by {1 - latency[index + 1] / latency[index]:.1%})"
                )
    return found


def check_monotone(frames: dict[str, pd.DataFrame], factor: float = 1.0) -> CheckResult:
    """Latency never decreases along context_len, microbatch or fanout_k.

    Args:
        frames: The files.
        factor: A step down from ``a`` to ``b`` fails when ``a / b > factor``
            (1: any decrease fails).
    """
    problems = [line for name, frame in frames.items() for line in _drops(name, frame, factor)]
    return CheckResult("latency monotone in context, batch and k", not problems, tuple(problems))


def check_monotone_measured(frames: dict[str, pd.DataFrame]) -> CheckResult:
    """Measured files: steps down within the measurements' repeatability are accepted and listed."""
    factor = repeatability()
    strict = check_monotone(frames, factor)
    accepted = [line for name, frame in frames.items() for line in _drops(name, frame, 1.0)]
    details = [
        *strict.details,
        *(
            f"accepted (within the repeatability x{factor:.4f}): {line}"
            for line in accepted
            if line not in strict.details
        ),
    ]
    return CheckResult(
        "measured files monotone within the measurements' repeatability",
        strict.ok,
        tuple(details),
    )


def expected_kv_mb(
    row_phase: str, model: str, context: np.ndarray, batch: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """KV cache an iteration appends, from the model shapes alone (draft heads included)."""
    models = shapes_with_heads()
    target_id, _, draft_id = model.partition("+")
    target = models[target_id].kv_mib_per_token
    draft = models[draft_id].kv_mib_per_token if draft_id else 0.0
    if row_phase == "prefill":
        return np.asarray(batch * context * (target + draft))
    if row_phase == "draft_decode":
        return np.asarray(batch * target)
    if row_phase == "verify":
        return np.asarray(batch * (k + 1) * target)
    return np.asarray(batch * ((k + 1) * target + k * draft))


def check_kv(frames: dict[str, pd.DataFrame]) -> CheckResult:
    """kv_delta_mb equals tokens appended x the model's KV bytes per token."""
    problems = []
    for name, frame in frames.items():
        for (phase, model), group in frame.groupby(["phase", "model"], sort=True):
            expected = expected_kv_mb(
                str(phase),
                str(model),
                group["context_len"].to_numpy(dtype=float),
                group["microbatch"].to_numpy(dtype=float),
                group["fanout_k"].to_numpy(dtype=float),
            )
            actual = group["kv_delta_mb"].to_numpy(dtype=float)
            rel = np.abs(actual - expected) / np.maximum(expected, 1e-12)
            if rel.max() > KV_TOLERANCE:
                problems.append(
                    f"{name} {phase}: kv_delta_mb off by up to {rel.max():.2e} of the shape formula"
                )
    return CheckResult("KV deltas match the model shapes", not problems, tuple(problems))


def check_spots(lut_dir: Path) -> CheckResult:
    """Published-figure comparisons."""
    lines = []
    ok = True
    for spot in spot_checks(lut_dir):
        flag = "ok" if spot.ok else "FAIL"
        ok = ok and spot.ok
        lines.append(
            f"{flag}: {spot.name}: LUT {spot.lut_ms:.2f} ms vs {spot.published_ms:.2f} ms "
            f"({spot.deviation:+.1%}; tolerance {SPOT_TOLERANCE:.0%}) [{spot.reference}]"
        )
    return CheckResult("spot checks against published figures", ok, tuple(lines))


def check_measured(lut_dir: Path) -> CheckResult:
    """H100 LUTs of measured models against the H100 measurements."""
    comparisons = compare_dir(lut_dir)
    lines = render(comparisons)
    lines += [f"tolerance {tier}: {tol.why}" for tier, tol in TOLERANCES.items()]
    ok = bool(comparisons) and all(c.ok for c in comparisons)
    if not comparisons:
        lines.append("no H100 LUT of a measured model found")
    return CheckResult("H100 LUTs against the H100 measurements", ok, tuple(lines))


def is_measured_file(name: str) -> bool:
    """Whether ``name`` (relative to the LUT directory) is built from measurements."""
    return name.startswith(f"{MICROBENCH_DIR}/")


def _measured_check(
    title: str, points: Sized, summaries: Sequence[HeadSummary], table: list[str]
) -> CheckResult:
    """A check of LUT rows against measured points: one line per summary, then the table."""
    lines = [
        f"{'ok' if s.ok else 'FAIL'}: {s.name}: median {s.median:.3f}, worst {s.worst:.3f} "
        f"over {len(s.ratios)} points (tolerance: median {HEAD_MEDIAN_TOLERANCE:.0%}, "
        f"each point {HEAD_POINT_TOLERANCE:.0%})"
        for s in summaries
    ]
    ok = len(points) > 0 and all(s.ok for s in summaries)
    return CheckResult(title, ok, (*lines, *table))


def check_heads(lut_dir: Path) -> CheckResult:
    """Draft-head rows and composition against the H100 head measurements."""
    points = head_points(lut_dir)
    return _measured_check(
        "draft heads against H100 measurements", points, head_summaries(points), head_table(points)
    )


def check_trees(lut_dir: Path) -> CheckResult:
    """Target verify rows at fanout_k = T - 1 against the H100 tree-mask measurements."""
    points = tree_points(lut_dir)
    return _measured_check(
        "token-tree verifies against H100 tree-mask measurements",
        points,
        tree_summaries(points),
        tree_table(points),
    )


def check_tpot() -> CheckResult:
    """CodeLlama-34B's composed decode step against ML.ENERGY v2's time per output token."""
    check = tpot_check()
    return CheckResult(
        "codellama-34b decode against ML.ENERGY v2 time per output token",
        check.ok,
        tuple(tpot_lines(check)),
    )


def _fit_engine(frame: pd.DataFrame) -> str | None:
    sources = set(frame["source"]) if len(frame) else set()
    return engine_of(sources.pop()) if len(sources) == 1 else None


def check_monotone_fitted(frames: dict[str, pd.DataFrame]) -> CheckResult:
    """DistServe-fit files: monotone on each side of the estimator's batch threshold."""
    problems: list[str] = []
    accepted: list[str] = []
    for name, frame in frames.items():
        for tp in sorted(set(frame["tensor_parallel"].astype(int))):
            group = frame[frame["tensor_parallel"] == tp]
            engine = _fit_engine(group) or "distserve"
            threshold = distserve_fit(str(group["model"].iloc[0]), tp, engine).threshold
            below = group[group["microbatch"] < threshold]
            above = group[group["microbatch"] >= threshold]
            problems += _drops(name, below, 1.0) + _drops(name, above, 1.0)
            sides = set(_drops(name, below, 1.0) + _drops(name, above, 1.0))
            accepted += [line for line in _drops(name, group, 1.0) if line not in sides]
    details = [*problems, *(f"accepted (the fits' batch threshold): {a}" for a in accepted)]
    return CheckResult(
        "DistServe-fit files monotone on each side of the decode batch threshold",
        not problems,
        tuple(details),
    )


def run_checks(lut_dir: Path) -> list[CheckResult]:
    """Run every check on the LUT files in ``lut_dir``."""
    built = build_tables()
    names = [b.spec.name for b in built]
    results = [check_up_to_date(lut_dir, built)]
    present = [n for n in names if (lut_dir / n).is_file()]
    results.append(check_loadable(lut_dir, present))
    frames = _frames(lut_dir, present)
    fitted = {n: f for n, f in frames.items() if _fit_engine(f) is not None}
    composed = {n: f for n, f in frames.items() if not is_measured_file(n) and n not in fitted}
    results.append(check_monotone(composed))
    results.append(
        check_monotone_measured(
            {n: f for n, f in frames.items() if n not in composed and n not in fitted}
        )
    )
    results.append(check_monotone_fitted(fitted))
    results.append(check_kv(frames))
    if all((lut_dir / n).is_file() for n in names):
        results.append(check_spots(lut_dir))
        results.append(check_measured(lut_dir))
        results.append(check_heads(lut_dir))
        results.append(check_trees(lut_dir))
    results.append(check_tpot())
    return results
