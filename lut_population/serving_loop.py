"""Step-timing rules derived from the H100 serving-loop measurements.

``python -m lut_population.serving_loop [--check]`` reads the copies in
``inputs/serving_loop_h100/`` (``lut_raw.csv``: fixed-shape prices with every
sequence at one context; ``steps_<mode>_r<rate>.csv``: every engine step of a
real serving loop, made by ``python -m lut_population prepare``), fits

* the **ragged-batch rule**: how a decode-lane step of sequences with different
  contexts is priced from a uniform-context table, and
* the **step-time dispersion** of each kind of step (plain decode, speculative
  round, prefill),

prints every candidate's errors and writes the chosen constants to
``simulator/data/step_timing.json``, which the simulator reads at load time
(:mod:`simulator.engine.step_timing`). ``--check`` writes nothing and exits 1
when the shipped file differs from what the data give.

The reference price of a measured step is the fixed-shape table interpolated
at the step's CUDA-graph bucket (between the two sizes measured in it) and a
context; the bucket is what the engine ran, so the comparison isolates the
effect of ragged contexts from bucket padding.

Ragged rule (chosen: ``tail_weighted``). The loop's attention is
FlashAttention's variable-length kernel: one CTA per sequence and head, each
working on its own sequence's KV. The total KV read is the same as a uniform
batch at the mean context, but the CTAs of the longest sequences finish last
and set the kernel's tail; so the step costs like a uniform batch at an
*effective* context between the mean and the longest::

    c_eff = mean + w * (max - mean)

``w`` (0: balanced, 1: the tail dominates) is fitted by least squares of the
log ratio measured / priced over the steps of more than one sequence, once
to the plain decode steps and once to the fused rounds, and each fit is
checked on the other kind. The candidates are the mean itself, the longest
context, and a constant latency factor (a fudge with no mechanism); their
errors are printed. The weight fitted to plain decode over-prices large
fused rounds by 2-4 % (and the other way round under-prices plain decode by
2 %), so each kind keeps its own weight: ``decode`` for plain decode steps,
``round`` for speculative rounds (verify and fused).

Dispersion: per kind of step, ``sigma`` of a lognormal from the residuals'
10th and 90th percentiles, ``(q90 - q10) / (2 * 1.2816)``. Decode and round
residuals are ``log(measured / priced)`` under the chosen rule, less their
median per (rate, n) so that systematic pricing error is not counted as
noise; prefill residuals are ``log(measured / fixed-shape price at the
prompt length)`` less their median per measurement file (the host's speed
drifted between processes, a shift of the whole file, not per-step noise).
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from lut_population.derived_json import derive_main
from lut_population.paths import INPUTS_DIR
from lut_population.prepare import SERVING_LOOP_DIR, SERVING_STEP_FILES

Array = npt.NDArray[np.float64]
DATA_DIR = INPUTS_DIR / SERVING_LOOP_DIR
OUTPUT = Path(__file__).resolve().parent.parent / "simulator" / "data" / "step_timing.json"
Z90 = 1.2815515655446004
"""The standard normal's 90th percentile: a lognormal's log q90 - log q10 is 2 * Z90 * sigma."""
N_GROUPS: tuple[tuple[int, int], ...] = ((2, 4), (5, 8), (9, 16), (17, 32))
"""Batch-size groups the ratios are reported by (one per CUDA-graph bucket above 1)."""
MIN_GROUP_STEPS = 30
"""Groups with fewer steps are left out of the per-group report."""
STEP_PHASE = {"plain": "decode", "fused": "fused"}
"""The step kind (and ``lut_raw`` phase) of each mode's decode-lane steps."""
PREFILL_PHASE = {"plain": "prefill_plain", "fused": "prefill_fused"}
"""The ``lut_raw`` phase of each mode's prefill."""


class UniformPrice:
    """Fixed-shape prices of one phase from ``lut_raw.csv`` (every sequence at one context)."""

    def __init__(self, rows: Sequence[dict[str, str]], phase: str) -> None:
        self._tables: dict[int, tuple[Array, Array, Array]] = {}
        mine = [r for r in rows if r["phase"] == phase]
        for bucket in sorted({int(r["bucket"]) for r in mine}):
            inside = [r for r in mine if int(r["bucket"]) == bucket]
            ns = sorted({int(r["n"]) for r in inside})
            cs = sorted({float(r["context_len"]) for r in inside})
            at = {
                (int(r["n"]), float(r["context_len"])): float(r["wall_ms_median"]) for r in inside
            }
            grid = np.array([[at[(n, c)] for c in cs] for n in ns])
            self._tables[bucket] = (np.array(ns, dtype=float), np.array(cs), grid)

    def ms(self, n: Array, bucket: Array, context: Array) -> Array:
        """Price of steps of ``n`` sequences in graph ``bucket`` at ``context`` (linear in both)."""
        out = np.empty(len(n))
        for b, (ns, cs, grid) in self._tables.items():
            mask = bucket == b
            if not mask.any():
                continue
            by_n = np.array([np.interp(context[mask], cs, row) for row in grid])
            if len(ns) == 1:
                out[mask] = by_n[0]
                continue
            # Linear in n between the bucket's two measured sizes.
            w = (n[mask] - ns[0]) / (ns[-1] - ns[0])
            out[mask] = by_n[0] + w * (by_n[-1] - by_n[0])
        return out


@dataclass(frozen=True)
class Steps:
    """The decode-lane steps of one mode, all rates together."""

    rate: Array
    n: Array
    bucket: Array
    mean_ctx: Array
    max_ctx: Array
    dur_ms: Array


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _rate(name: str) -> float:
    return float(name.rsplit("_r", 1)[1].removesuffix(".csv"))


def read_steps(data: Path, mode: str) -> Steps:
    """Every decode-lane step (plain decode or fused round) of ``mode``'s three runs."""
    cols: dict[str, list[float]] = {k: [] for k in ("rate", "n", "bucket", "mean", "max", "dur")}
    for name in SERVING_STEP_FILES:
        if not name.startswith(f"steps_{mode}_"):
            continue
        for row in _read(data / name):
            if row["kind"] != STEP_PHASE[mode]:
                continue
            cols["rate"].append(_rate(name))
            cols["n"].append(float(row["n"]))
            cols["bucket"].append(float(row["bucket"]))
            cols["mean"].append(float(row["mean_ctx"]))
            cols["max"].append(float(row["max_ctx"]))
            cols["dur"].append(float(row["dur_ms"]))
    a = {k: np.array(v) for k, v in cols.items()}
    return Steps(a["rate"], a["n"], a["bucket"], a["mean"], a["max"], a["dur"])


def effective_context(steps: Steps, tail_weight: float) -> Array:
    """The ``tail_weighted`` rule's context: ``mean + w * (max - mean)``."""
    return steps.mean_ctx + tail_weight * (steps.max_ctx - steps.mean_ctx)


Rule = Callable[[Steps, UniformPrice], Array]
"""A candidate rule: the price (ms) it gives each step."""


def tail_weighted(weight: float) -> Rule:
    """Price at the effective context ``mean + weight * (max - mean)``."""
    return lambda s, p: p.ms(s.n, s.bucket, effective_context(s, weight))


def scaled(factor: float) -> Rule:
    """Price at the mean context times a constant ``factor``."""
    return lambda s, p: factor * p.ms(s.n, s.bucket, s.mean_ctx)


def log_ratio(steps: Steps, price: UniformPrice, rule: Rule) -> Array:
    """``log(measured / priced)`` of every step under ``rule``."""
    return np.asarray(np.log(steps.dur_ms / rule(steps, price)), dtype=float)


def fit_tail_weight(steps: Steps, price: UniformPrice) -> float:
    """Least-squares ``w`` of the log ratio over steps of more than one sequence (grid 0.001)."""
    ragged = steps.n >= 2
    sub = Steps(*(np.asarray(getattr(steps, f))[ragged] for f in Steps.__dataclass_fields__))
    weights = np.round(np.arange(0, 1001) / 1000.0, 3)
    errors = [float(np.mean(log_ratio(sub, price, tail_weighted(w)) ** 2)) for w in weights]
    return float(weights[int(np.argmin(errors))])


def fit_factor(steps: Steps, price: UniformPrice) -> float:
    """Least-squares constant factor of the log ratio over steps of more than one sequence."""
    ragged = steps.n >= 2
    r = np.log(steps.dur_ms[ragged] / price.ms(steps.n, steps.bucket, steps.mean_ctx)[ragged])
    return round(float(np.exp(np.mean(r))), 4)


def group_medians(steps: Steps, ratio: Array) -> dict[str, float]:
    """Median ratio per batch-size group (all rates together)."""
    out: dict[str, float] = {}
    for lo, hi in N_GROUPS:
        mask = (steps.n >= lo) & (steps.n <= hi)
        if mask.sum() >= MIN_GROUP_STEPS:
            out[f"n{lo}-{hi}"] = round(float(np.median(ratio[mask])), 4)
    return out


def rule_errors(steps: Steps, price: UniformPrice, rule: Rule) -> dict[str, object]:
    """Median ratio measured / priced, rms log error and per-group medians of ``rule``."""
    r = log_ratio(steps, price, rule)
    ragged = steps.n >= 2
    return {
        "median_ratio": round(float(np.exp(np.median(r[ragged]))), 4),
        "rms_log_error": round(float(np.sqrt(np.mean(r[ragged] ** 2))), 4),
        "median_ratio_by_n": group_medians(steps, np.exp(r)),
    }


def dispersion(residual: Array) -> float:
    """Lognormal ``sigma`` from the residuals' 10th and 90th percentiles."""
    q10, q90 = np.percentile(residual, [10, 90])
    return round(float((q90 - q10) / (2 * Z90)), 4)


def centred(values: Array, keys: Sequence[Array]) -> Array:
    """``values`` less their median within each combination of ``keys``."""
    out = values.copy()
    combos = np.stack(keys, axis=1)
    for combo in np.unique(combos, axis=0):
        mask = np.all(combos == combo, axis=1)
        out[mask] -= np.median(values[mask])
    return np.asarray(out, dtype=np.float64)


def prefill_residuals(data: Path, rows: Sequence[dict[str, str]]) -> Array:
    """Log ratio of every prefill step to the fixed-shape price at its prompt, less each file's median."""
    parts = []
    for name in SERVING_STEP_FILES:
        mode = name.split("_")[1]
        table = [r for r in rows if r["phase"] == PREFILL_PHASE[mode]]
        xs = np.array([float(r["context_len"]) for r in table])
        ys = np.array([float(r["wall_ms_median"]) for r in table])
        steps = [r for r in _read(data / name) if r["kind"] == "prefill"]
        prompt = np.array([float(r["prompt"]) for r in steps])
        dur = np.array([float(r["dur_ms"]) for r in steps])
        r = np.log(dur / np.interp(prompt, xs, ys))
        parts.append(r - np.median(r))
    return np.concatenate(parts)


def fixed_shape_sigma(rows: Sequence[dict[str, str]], phase: str) -> float:
    """Median over the fixed shapes of ``phase`` of the lognormal sigma from their p10 and p90."""
    s = [
        math.log(float(r["wall_ms_p90"]) / float(r["wall_ms_p10"])) / (2 * Z90)
        for r in rows
        if r["phase"] == phase
    ]
    return round(float(np.median(s)), 4)


def derive(data: Path = DATA_DIR) -> dict[str, object]:
    """Fit every candidate and return the derived file's content (also its report)."""
    rows = _read(data / "lut_raw.csv")
    steps = {mode: read_steps(data, mode) for mode in STEP_PHASE}
    prices = {mode: UniformPrice(rows, phase) for mode, phase in STEP_PHASE.items()}
    weight = {mode: fit_tail_weight(steps[mode], prices[mode]) for mode in STEP_PHASE}
    factor = {mode: fit_factor(steps[mode], prices[mode]) for mode in STEP_PHASE}
    candidates: dict[str, object] = {}
    for fit_mode in STEP_PHASE:
        rules: dict[str, Rule] = {
            "mean": tail_weighted(0.0),
            "longest": tail_weighted(1.0),
            f"scaled({factor[fit_mode]})": scaled(factor[fit_mode]),
            f"tail_weighted({weight[fit_mode]})": tail_weighted(weight[fit_mode]),
        }
        candidates[f"fitted_to_{fit_mode}"] = {
            name: {mode: rule_errors(steps[mode], prices[mode], rule) for mode in STEP_PHASE}
            for name, rule in rules.items()
        }
    residual = {
        mode: centred(
            log_ratio(steps[mode], prices[mode], tail_weighted(weight[mode])),
            (steps[mode].rate, steps[mode].n),
        )
        for mode in STEP_PHASE
    }
    return {
        "source": (
            "lut_population/inputs/serving_loop_h100/ (one H100 80GB HBM3, Llama-2-7B target, "
            "TinyLlama-1.1B draft, measured 2026-11-25; see lut_population/inputs/SOURCES.md)"
        ),
        "derived_by": "python -m lut_population.serving_loop",
        "ragged": {
            "rule": "tail_weighted",
            "tail_weight": {"decode": weight["plain"], "round": weight["fused"]},
            "definition": "effective context = mean + tail_weight * (max - mean)",
            "fitted_to": (
                "decode: plain decode steps, round: fused rounds, each of 2-32 sequences "
                "(all three rates); least squares of log(measured / price at the effective "
                "context), price = lut_raw at the step's bucket"
            ),
            "candidates": candidates,
        },
        "step_noise": {
            "distribution": "lognormal with mean 1: exp(sigma * z - sigma^2 / 2), z standard normal",
            "sigma": {
                "decode": dispersion(residual["plain"]),
                "round": dispersion(residual["fused"]),
                "prefill": dispersion(prefill_residuals(data, rows)),
            },
            "from": (
                "10th and 90th percentiles of each kind's residuals: decode and round steps "
                "log(measured / price under the ragged rule) less their median per rate and n; "
                "prefill steps log(measured / fixed-shape price at the prompt length) less "
                "their median per file"
            ),
            "fixed_shape_sigma": {
                phase: fixed_shape_sigma(rows, phase)
                for phase in ("decode", "fused", "prefill_plain", "prefill_fused")
            },
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Derive the constants; write them (or ``--check`` them against the shipped file)."""
    return derive_main(argv, __doc__.splitlines()[0], DATA_DIR, OUTPUT, derive)


if __name__ == "__main__":
    sys.exit(main())
