"""Spot checks of the built LUTs against published measurements that are in the data.

Each check looks up one LUT row and compares it with a figure derived from a
copied input:

* DistServe's fitted A100-80GB decode and prefill costs of OPT-66B
  (``a + b * tokens + c * batch`` for decode, ``a + b * tokens + c * tokens^2``
  for prefill, as in DistServe's ``simdistserve/estimators/time_estimator.py``),
  against Llama-2-70B on A100 at the same TP degree (a model of similar size
  served by a different engine);
* ML.ENERGY v3's median inter-token latency on H100 of Llama-3.1-70B (TP 4)
  and Llama-3.1-8B (TP 1) at measured batch sizes, against the decode rows of
  the same models at the same batch and a 1024-token context (the runs'
  contexts are not in the data).

The tolerance, :data:`SPOT_TOLERANCE`, is wide on purpose: the compared models
and engines differ (OPT vs Llama, vLLM with CUDA graphs and custom all-reduce
vs Vidur's eager-mode operator and NCCL profiles), so the checks catch unit
errors and broken composition, not 10 % effects. Every comparison and its
deviation is printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lut_population.inputs import load_distserve, load_power_points
from simulator.lut import LutKey, LutManager, load_lut

SPOT_TOLERANCE = 0.35
"""Largest accepted relative deviation of a LUT value from a published figure."""

SPOT_CONTEXT = 1024
"""Context of the decode comparisons (a grid point; the runs' contexts are not in the data)."""


@dataclass(frozen=True)
class SpotCheck:
    """One comparison.

    Attributes:
        name: What is compared.
        lut_ms: The LUT's latency.
        published_ms: The published figure.
        reference: Where the figure comes from.
    """

    name: str
    lut_ms: float
    published_ms: float
    reference: str

    @property
    def deviation(self) -> float:
        """Relative deviation of the LUT from the published figure."""
        return self.lut_ms / self.published_ms - 1.0

    @property
    def ok(self) -> bool:
        """Within :data:`SPOT_TOLERANCE`."""
        return abs(self.deviation) <= SPOT_TOLERANCE


def _lookup(lut_dir: Path, file: str, key: LutKey, context: int, batch: int) -> float:
    manager = LutManager([load_lut(lut_dir / file)])
    return float(manager.lookup(key, context, batch, 1).latency_ms)


def distserve_checks(lut_dir: Path) -> list[SpotCheck]:
    """OPT-66B DistServe fits against Llama-2-70B on A100."""
    fits = load_distserve()["facebook/opt-66b"]
    file = "llama-2-70b__a100-sxm4-80gb.csv"
    ref = "inputs/distserve/profiler-a100-80g.distserve.json facebook/opt-66b"
    checks = []
    for tp in (2, 4, 8):
        a, b, c = fits[str(tp)]["decoding_smallbs"]
        published = a + b * SPOT_CONTEXT + c * 1
        key = LutKey("draft_decode", "llama-2-70b", "a100-sxm4-80gb", tp, 1, "fp16")
        lut = _lookup(lut_dir, file, key, SPOT_CONTEXT, 1)
        checks.append(
            SpotCheck(
                f"decode llama-2-70b A100 TP{tp} batch 1 ctx {SPOT_CONTEXT} vs OPT-66B",
                lut,
                published,
                f"{ref} TP {tp} decoding_smallbs: a + b * {SPOT_CONTEXT} + c",
            )
        )
    a, b, c = fits["4"]["prefill"]
    prompt = 1024
    key = LutKey("prefill", "llama-2-70b", "a100-sxm4-80gb", 4, 1, "fp16")
    checks.append(
        SpotCheck(
            f"prefill llama-2-70b A100 TP4 {prompt} tokens vs OPT-66B",
            _lookup(lut_dir, file, key, prompt, 1),
            a + b * prompt + c * prompt**2,
            f"{ref} TP 4 prefill: a + b * {prompt} + c * {prompt}^2",
        )
    )
    return checks


MLENERGY_CASES = (
    ("meta-llama/Llama-3.1-70B-Instruct", 4, "llama-3.1-70b", 8),
    ("meta-llama/Llama-3.1-70B-Instruct", 4, "llama-3.1-70b", 64),
    ("meta-llama/Llama-3.1-8B-Instruct", 1, "llama-3.1-8b", 8),
    ("meta-llama/Llama-3.1-8B-Instruct", 1, "llama-3.1-8b", 64),
)
"""(measured model, TP, LUT model, batch) of the ML.ENERGY comparisons."""


def mlenergy_checks(lut_dir: Path) -> list[SpotCheck]:
    """ML.ENERGY v3 H100 median inter-token latency against decode rows."""
    checks = []
    points = [p for p in load_power_points() if "mlenergy_v3" in p.reference]
    for measured, tp, model, batch in MLENERGY_CASES:
        point = min(
            (p for p in points if p.model == measured and p.tensor_parallel == tp),
            key=lambda p: abs(p.batch - batch),
        )
        key = LutKey("draft_decode", model, "h100-sxm5-80gb", tp, 1, "fp16")
        lut = _lookup(lut_dir, f"{model}__h100-sxm5-80gb.csv", key, SPOT_CONTEXT, batch)
        checks.append(
            SpotCheck(
                f"decode {model} H100 TP{tp} batch {batch} ctx {SPOT_CONTEXT} vs {measured}",
                lut,
                point.itl_ms,
                f"{point.reference.split(':')[0]}: median_itl_ms at avg_batch {point.batch}",
            )
        )
    return checks


def spot_checks(lut_dir: Path) -> list[SpotCheck]:
    """All spot checks."""
    return distserve_checks(lut_dir) + mlenergy_checks(lut_dir)
