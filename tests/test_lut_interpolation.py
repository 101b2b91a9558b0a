from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import InputError
from simulator.lut import LutKey, LutTable, load_lut
from simulator.lut.interpolate import bracket
from tests.lut_factory import (
    CONTEXT_LENS,
    FANOUT_KS,
    MICROBATCHES,
    analytic_latency_ms,
    analytic_values,
    grid_rows,
    write_lut,
)

VERIFY = LutKey("verify", "llama-2-7b", "a100-sxm4-80gb", 1, 1, "fp16")
PREFILL = LutKey("prefill", "llama-2-7b", "a100-sxm4-80gb", 1, 1, "fp16")
REL = 1e-9


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> LutTable:
    path = tmp_path_factory.mktemp("lut") / "llama-2-7b__a100-sxm4-80gb.csv"
    return load_lut(write_lut(path, phases=("prefill", "verify")), use_cache=False)


def _expect(c: float, m: float, k: float) -> dict[str, float]:
    return analytic_values(c, m, k)


def _check(result: object, c: float, m: float, k: float) -> None:
    want = _expect(c, m, k)
    for name, value in want.items():
        assert getattr(result, name) == pytest.approx(value, rel=REL), name


def test_grid_axes_sorted(table: LutTable) -> None:
    grid = table.grid(VERIFY)
    assert grid.context_len == CONTEXT_LENS
    assert grid.microbatch == MICROBATCHES
    assert grid.fanout_k == FANOUT_KS
    assert table.grid(PREFILL).fanout_k == (1,)
    assert table.keys() == frozenset({VERIFY, PREFILL})


def test_exact_at_every_grid_point(table: LutTable) -> None:
    for c, m, k in itertools.product(CONTEXT_LENS, MICROBATCHES, FANOUT_KS):
        result = table.lookup(VERIFY, c, m, k)
        want = _expect(c, m, k)
        # Grid points return the stored numbers unchanged, bit for bit.
        assert result.latency_ms == float(repr(want["latency_ms"]))
        assert result.energy_mj == float(repr(want["energy_mj"]))
        assert result.peak_mem_mb == want["peak_mem_mb"]
        assert result.kv_delta_mb == want["kv_delta_mb"]


@pytest.mark.parametrize(
    ("c", "m", "k"),
    [
        (320, 4, 2),  # midpoint on context_len only
        (128, 10, 2),  # midpoint on microbatch only
        (512, 4, 3),  # midpoint on fanout_k only
        (1280, 2.5, 1.5),  # interior of a cell on all three axes
        (700.25, 13, 3.9),
    ],
)
def test_linear_between_grid_points(table: LutTable, c: float, m: float, k: float) -> None:
    _check(table.lookup(VERIFY, c, m, k), c, m, k)


def test_midpoint_is_mean_of_neighbours(table: LutTable) -> None:
    low = table.lookup(VERIFY, 512, 4, 2).latency_ms
    high = table.lookup(VERIFY, 2048, 4, 2).latency_ms
    assert table.lookup(VERIFY, 1280, 4, 2).latency_ms == pytest.approx((low + high) / 2)


@settings(max_examples=200, deadline=None)
@given(
    c=st.floats(min_value=128, max_value=2048),
    m=st.floats(min_value=1, max_value=16),
    k=st.floats(min_value=1, max_value=4),
)
def test_trilinear_matches_multilinear_truth(table: LutTable, c: float, m: float, k: float) -> None:
    result = table.lookup(VERIFY, c, m, k)
    assert result.latency_ms == pytest.approx(analytic_latency_ms(c, m, k), rel=REL)
    _check(result, c, m, k)


def test_raise_names_file_key_axis_value_and_range(table: LutTable) -> None:
    with pytest.raises(InputError) as info:
        table.lookup(VERIFY, 4096, 4, 2)
    (issue,) = info.value.issues
    assert issue.file == str(table.path)
    assert "phase=verify" in issue.key_path and "context_len" in issue.key_path
    assert issue.value == "4096"
    assert "128 to 2048" in issue.allowed
    with pytest.raises(InputError, match=r"microbatch.*got 0\.5.*1 to 16"):
        table.lookup(VERIFY, 512, 0.5, 2, out_of_range="raise")
    with pytest.raises(InputError, match=r"fanout_k.*got 5.*1 to 4"):
        table.lookup(VERIFY, 512, 4, 5)


def test_clamp_uses_nearest_edge(table: LutTable) -> None:
    _check(table.lookup(VERIFY, 100_000, 4, 2, out_of_range="clamp"), 2048, 4, 2)
    _check(table.lookup(VERIFY, 1, 0.2, 9, out_of_range="clamp"), 128, 1, 4)
    _check(table.lookup(VERIFY, 300, 20, 3, out_of_range="clamp"), 300, 16, 3)


def test_extrapolate_continues_edge_lines(table: LutTable) -> None:
    # The truth is multilinear, so linear extension along the edge cells is exact.
    _check(table.lookup(VERIFY, 4096, 4, 2, out_of_range="extrapolate"), 4096, 4, 2)
    _check(table.lookup(VERIFY, 64, 32, 6, out_of_range="extrapolate"), 64, 32, 6)


def test_extrapolate_never_goes_below_zero(tmp_path: Path) -> None:
    def falling(c: float, m: float, k: float) -> dict[str, float]:
        value = 100.0 - 0.04 * c
        return {"latency_ms": value, "energy_mj": value, "peak_mem_mb": value, "kv_delta_mb": 1.0}

    rows = grid_rows(context_lens=(500, 2000), microbatches=(1,), fanout_ks=(1,), values=falling)
    table = load_lut(write_lut(tmp_path / "f.csv", rows), use_cache=False)
    near = table.lookup(VERIFY, 2100, 1, 1, out_of_range="extrapolate")
    assert near.latency_ms == pytest.approx(16.0)
    far = table.lookup(VERIFY, 5000, 1, 1, out_of_range="extrapolate")
    assert (far.latency_ms, far.energy_mj, far.peak_mem_mb) == (0.0, 0.0, 0.0)
    assert far.kv_delta_mb == 1.0


def test_single_value_axis_needs_exact_match(table: LutTable) -> None:
    _check(table.lookup(PREFILL, 512, 4, 1), 512, 4, 1)
    with pytest.raises(InputError, match=r"exactly 1"):
        table.lookup(PREFILL, 512, 4, 2)
    # clamp and extrapolate hold a single-valued axis constant.
    _check(table.lookup(PREFILL, 512, 4, 2, out_of_range="clamp"), 512, 4, 1)
    _check(table.lookup(PREFILL, 512, 4, 3, out_of_range="extrapolate"), 512, 4, 1)


def test_nan_query_is_rejected_in_every_mode(table: LutTable) -> None:
    for mode in ("raise", "clamp", "extrapolate"):
        with pytest.raises(InputError, match="NaN"):
            table.lookup(VERIFY, math.nan, 4, 2, out_of_range=mode)  # type: ignore[arg-type]


def test_unknown_mode_is_a_programming_error(table: LutTable) -> None:
    with pytest.raises(ValueError, match="out_of_range"):
        table.lookup(VERIFY, 512, 4, 2, out_of_range="wrap")  # type: ignore[arg-type]


def test_unknown_key_in_table(table: LutTable) -> None:
    other = LutKey("verify", "llama-2-7b", "a100-sxm4-80gb", 2, 1, "fp16")
    with pytest.raises(InputError) as info:
        table.lookup(other, 512, 4, 2)
    text = info.value.render()
    assert "tp=2" in text and "prefill/tp1/pp1/fp16" in text and "verify/tp1/pp1/fp16" in text


def test_repeated_queries_hit_the_cache(tmp_path: Path) -> None:
    table = load_lut(write_lut(tmp_path / "c.csv"), use_cache=False)
    first = table.lookup(VERIFY, 700, 3, 2)
    second = table.lookup(VERIFY, 700, 3, 2)
    assert first is second
    hits, misses, size = table.cache_info()
    assert (hits, misses, size) == (1, 1, 1)
    table.clear_cache()
    assert table.cache_info() == (0, 0, 0)


@pytest.mark.parametrize(
    ("value", "mode", "expected"),
    [
        (10.0, "raise", (0, 0, 0.0)),
        (15.0, "raise", (0, 1, 0.5)),
        (30.0, "raise", (2, 2, 0.0)),
        (20.0, "raise", (1, 1, 0.0)),
        (5.0, "raise", None),
        (5.0, "clamp", (0, 0, 0.0)),
        (40.0, "clamp", (2, 2, 0.0)),
        (5.0, "extrapolate", (0, 1, -0.5)),
        (40.0, "extrapolate", (1, 2, 2.0)),
    ],
)
def test_bracket(value: float, mode: str, expected: object) -> None:
    assert bracket([10.0, 20.0, 30.0], value, mode) == expected  # type: ignore[arg-type]
