"""Grids: refinement, the 2 % interpolation promise, monotonicity, smoothing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lut_population.build import build_key
from lut_population.grid import (
    DATACENTER_BATCHES,
    PROMISED_TOLERANCE,
    TREE_FANOUTS,
    Grid,
    base_grid,
    bilinear,
    evaluate_grid,
    fanout_errors,
    refine,
)
from lut_population.isotonic import non_decreasing
from lut_population.phases import FusedRoundCost, Metrics, SinglePhaseCost
from lut_population.plan import KeySpec, build_plan, device_model, gpu_model

A100 = "a100-sxm4-80gb"
H100 = "h100-sxm5-80gb"


def key(cost, phase: str, max_context: int, batches=DATACENTER_BATCHES) -> KeySpec:
    return KeySpec(phase, "m", "hw", 1, cost, base_grid(phase, max_context, batches))


def sample_error(spec: KeySpec, seed: int, n: int = 300) -> float:
    built = build_key(spec)
    grid = built.grid
    rng = np.random.default_rng(seed)
    uniform = rng.integers(grid.context[0], grid.context[-1] + 1, n)
    # half the points log-uniform, so that short contexts of long-window grids are sampled too
    log_uniform = np.exp(rng.uniform(np.log(grid.context[0]), np.log(grid.context[-1]), n))
    c = np.where(np.arange(n) % 2 == 0, uniform, np.round(log_uniform)).astype(float)
    b = rng.integers(grid.batch[0], grid.batch[-1] + 1, n).astype(float)
    ki = rng.integers(0, len(grid.fanout_k), n)
    k = np.asarray(grid.fanout_k, dtype=float)[ki]
    exact = spec.cost.evaluate(c, b, k)
    worst = 0.0
    for table, values in (
        (built.metrics.latency_ms, exact.latency_ms),
        (built.metrics.energy_mj, exact.energy_mj),
    ):
        estimate = bilinear(grid, table, c, b, ki)
        worst = max(worst, float(np.max(np.abs(estimate - values) / values)))
    return worst


CASES = [
    ("verify", lambda: SinglePhaseCost(gpu_model("llama-2-70b", H100, 4), "verify"), 4096),
    ("prefill", lambda: SinglePhaseCost(gpu_model("llama-3-8b", A100, 1), "prefill"), 8192),
    (
        "draft_decode",
        lambda: SinglePhaseCost(gpu_model("llama-2-7b", H100, 2), "draft_decode"),
        4096,
    ),
    (
        "fused_decode",
        lambda: FusedRoundCost(
            gpu_model("llama-2-7b", A100, 1), gpu_model("tinyllama-1.1b", A100, 1), "t"
        ),
        2048,
    ),
    ("prefill", lambda: SinglePhaseCost(gpu_model("llama-3.2-1b", H100, 1), "prefill"), 131072),
]

LONG_CONTEXT_CASES = [
    ("verify", lambda: SinglePhaseCost(gpu_model("llama-3.1-70b", H100, 8), "verify"), 131072),
    ("prefill", lambda: SinglePhaseCost(gpu_model("llama-3.1-8b", A100, 1), "prefill"), 131072),
    (
        "draft_decode",
        lambda: SinglePhaseCost(gpu_model("llama-3.1-8b", H100, 2), "draft_decode"),
        131072,
    ),
    (
        "fused_decode",
        lambda: FusedRoundCost(
            gpu_model("llama-3.1-70b", A100, 4), gpu_model("llama-3.2-1b", A100, 1), "t"
        ),
        131072,
    ),
]
"""Keys of the 128k-window targets (grids to 131 072 tokens)."""


@pytest.mark.parametrize(("phase", "make", "max_context"), CASES)
def test_linear_interpolation_is_within_two_percent(phase, make, max_context):
    assert sample_error(key(make(), phase, max_context), seed=len(phase)) <= PROMISED_TOLERANCE


@pytest.mark.parametrize(("phase", "make", "max_context"), LONG_CONTEXT_CASES)
def test_long_context_interpolation_is_within_two_percent(phase, make, max_context):
    spec = key(make(), phase, max_context)
    assert spec.grid.context[-1] == 131072
    assert sample_error(spec, seed=len(phase) + 7) <= PROMISED_TOLERANCE


def test_device_grid_interpolation_is_within_two_percent():
    cost = SinglePhaseCost(device_model("llama-3.2-1b", "jetson-orin-nano-super"), "prefill")
    spec = key(cost, "prefill", 131072, batches=(1, 2, 4, 8, 16))
    assert sample_error(spec, seed=3) <= PROMISED_TOLERANCE


@dataclass
class Curved:
    """Latency = context^2 / 1000 + batch: bent along context only."""

    phase: str = "draft_decode"
    source: str = "test"
    capacity_mb: float | None = None

    def evaluate(self, context, batch, k) -> Metrics:
        latency = np.asarray(context * context / 1000.0 + batch + 0.0 * k, dtype=float)
        zero = np.zeros_like(latency)
        return Metrics(latency, zero, zero, zero, energy_known=False)


def test_refine_adds_points_only_along_the_bent_axis():
    start = Grid((128, 1024, 4096), (1, 256), (1,))
    grid = refine(Curved(), start)
    assert grid.batch == (1, 256)  # linear in batch: nothing to add
    assert len(grid.context) > len(start.context)
    values = evaluate_grid(Curved(), grid).latency_ms
    c = np.arange(128.0, 4097.0, 37.0)
    estimate = bilinear(grid, values, c, np.full_like(c, 100.0), np.zeros(c.size, dtype=int))
    exact = c * c / 1000 + 100
    assert np.max(np.abs(estimate - exact) / exact) <= PROMISED_TOLERANCE


def test_built_latency_is_monotone_on_sampled_keys():
    plan = build_plan()
    specs = [k for f in plan if f.name.startswith(("llama-2-70b__", "llama-68m__")) for k in f.keys]
    assert specs
    for spec in specs:
        latency = build_key(spec).metrics.latency_ms
        assert np.all(np.diff(latency, axis=0) >= 0), spec.phase
        assert np.all(np.diff(latency, axis=1) >= 0), spec.phase
        assert np.all(np.diff(latency, axis=2) >= 0), spec.phase


def test_grids_start_at_the_base_and_stop_at_the_model_context():
    grid = base_grid("verify", 4096, DATACENTER_BATCHES)
    assert grid.context == (128, 256, 512, 1024, 2048, 4096)
    assert base_grid("verify", 131072, DATACENTER_BATCHES).context[-3:] == (32768, 65536, 131072)
    assert grid.fanout_k == tuple(range(1, 9))
    assert base_grid("prefill", 2048, (1, 2)).fanout_k == (1,)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False), min_size=1, max_size=60))
def test_non_decreasing_fit_is_monotone_and_keeps_the_total(values):
    data = np.asarray(values, dtype=float)
    fitted = non_decreasing(data)
    assert fitted.shape == data.shape
    assert np.all(np.diff(fitted) >= -1e-9)
    assert fitted.sum() == pytest.approx(data.sum(), abs=1e-6 * (1 + np.abs(data).sum()))
    if np.all(np.diff(data) >= 0):
        assert np.allclose(fitted, data)


def test_tree_verify_grid_keeps_the_promise_at_its_fanouts_and_reports_between():
    """A target's verify adds the tree fanouts; interpolation between them is reported."""
    cost = SinglePhaseCost(gpu_model("llama-3-8b", H100, 1), "verify")
    spec = KeySpec(
        "verify", "m", "hw", 1, cost, base_grid("verify", 2048, DATACENTER_BATCHES, True)
    )
    assert spec.grid.fanout_k == (*range(1, 9), *TREE_FANOUTS)
    assert sample_error(spec, seed=7) <= PROMISED_TOLERANCE
    between = fanout_errors(cost, build_key(spec).grid)
    assert set(between) == set(zip(spec.grid.fanout_k[7:], spec.grid.fanout_k[8:], strict=False))
    assert max(between.values()) < 0.15


def test_only_target_verify_keys_get_tree_fanouts():
    by_name = {f.name: f for f in build_plan()}
    target = by_name[f"llama-3-8b__{H100}.csv"]
    fused = by_name[f"llama-3-8b+llama-3-8b.eagle3__{H100}.csv"]
    for spec in target.keys:
        assert (max(spec.grid.fanout_k) == TREE_FANOUTS[-1]) == (spec.phase == "verify")
    assert all(max(spec.grid.fanout_k) <= 8 for spec in fused.keys)
    a100 = by_name["llama-3-8b__a100-sxm4-80gb.csv"]
    assert all(max(spec.grid.fanout_k) <= 8 for spec in a100.keys)
