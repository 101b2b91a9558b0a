from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from simulator.workload import (
    EmpiricalLength,
    FixedLength,
    GammaArrivals,
    LognormalLength,
    OnOffArrivals,
    PoissonArrivals,
    RequestTable,
    SloTargets,
    UniformLength,
    mean_rate_per_s,
    read_trace,
    sample_arrivals,
    sample_length_pairs,
)

TRACES = Path(__file__).resolve().parent.parent / "scenarios" / "traces"


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


# -- arrivals -------------------------------------------------------------------


@pytest.mark.parametrize(
    "process",
    [PoissonArrivals(2.0), GammaArrivals(5.0, 3.0), GammaArrivals(0.5, 0.5)],
)
def test_rate_within_three_percent(process):
    times = sample_arrivals(process, rng(1), count=200_000)
    assert times[0] == 0.0 and np.all(np.diff(times) >= 0)
    rate = (len(times) - 1) / times[-1]
    assert rate == pytest.approx(process.rate_per_s, rel=0.03)


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_cv_within_ten_percent(cv):
    gaps = np.diff(sample_arrivals(GammaArrivals(2.0, cv), rng(2), count=200_000))
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.10)


def test_poisson_gaps_have_cv_one():
    gaps = np.diff(sample_arrivals(PoissonArrivals(3.0), rng(3), count=200_000))
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


def test_on_off_is_silent_when_off_and_has_the_long_run_rate():
    process = OnOffArrivals(rate_per_s=2.0, on_s=10.0, off_s=20.0)
    times = sample_arrivals(process, rng(4), duration_s=60_000.0)
    assert times[0] == 0.0 and times[-1] < 60_000.0
    assert np.all(np.mod(times, 30.0) < 10.0)
    assert mean_rate_per_s(process) == pytest.approx(2.0 / 3.0)
    assert len(times) / 60_000.0 == pytest.approx(2.0 / 3.0, rel=0.03)
    # During on periods the rate is rate_per_s.
    on_time = 60_000.0 / 30.0 * 10.0
    assert len(times) / on_time == pytest.approx(2.0, rel=0.03)


def test_duration_mode_stays_inside_the_window():
    times = sample_arrivals(PoissonArrivals(50.0), rng(5), duration_s=100.0)
    assert times[-1] < 100.0
    assert len(times) == pytest.approx(5_000, rel=0.05)


def test_count_mode_gives_exact_count_and_needs_one_limit():
    assert len(sample_arrivals(PoissonArrivals(1.0), rng(), count=7)) == 7
    assert len(sample_arrivals(PoissonArrivals(1.0), rng(), count=0)) == 0
    with pytest.raises(ValueError):
        sample_arrivals(PoissonArrivals(1.0), rng())
    with pytest.raises(ValueError):
        sample_arrivals(PoissonArrivals(1.0), rng(), count=3, duration_s=1.0)


def test_arrivals_are_reproducible_from_the_generator():
    a = sample_arrivals(GammaArrivals(2.0, 2.0), rng(9), count=100)
    b = sample_arrivals(GammaArrivals(2.0, 2.0), rng(9), count=100)
    c = sample_arrivals(GammaArrivals(2.0, 2.0), rng(10), count=100)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


# -- length distributions -------------------------------------------------------


def test_fixed_and_uniform():
    assert np.all(FixedLength(128).sample(50, rng()) == 128)
    assert FixedLength(128).mean_tokens() == 128.0
    values = UniformLength(64, 1024).sample(100_000, rng(6))
    assert values.dtype == np.int64
    assert values.min() == 64 and values.max() == 1024
    assert values.mean() == pytest.approx(UniformLength(64, 1024).mean_tokens(), rel=0.01)
    assert UniformLength(64, 1024).mean_tokens() == 544.0


def test_lognormal_median_and_mean_untruncated():
    dist = LognormalLength(median_tokens=512.0, sigma=1.0)
    values = dist.sample(200_000, rng(7))
    assert values.min() >= 1
    assert np.median(values) == pytest.approx(512, rel=0.02)
    # Mean of a lognormal: median * exp(sigma^2 / 2).
    assert dist.mean_tokens() == pytest.approx(512 * np.exp(0.5), rel=1e-6)
    assert values.mean() == pytest.approx(dist.mean_tokens(), rel=0.02)


def test_lognormal_truncation_conditions_instead_of_clipping():
    dist = LognormalLength(median_tokens=512.0, sigma=1.0, min_tokens=100, max_tokens=2048)
    values = dist.sample(200_000, rng(8))
    assert values.min() >= 100 and values.max() <= 2048
    # Conditioning leaves no pile-up at the bounds (clipping would put ~5% there).
    assert np.mean(values == 2048) < 0.001
    expected = stats.lognorm(s=1.0, scale=512.0).expect(lb=100, ub=2048, conditional=True)
    assert dist.mean_tokens() == pytest.approx(expected, rel=1e-4)
    assert values.mean() == pytest.approx(expected, rel=0.01)


def test_lognormal_range_far_in_the_upper_tail():
    dist = LognormalLength(median_tokens=10.0, sigma=0.5, min_tokens=200, max_tokens=210)
    values = dist.sample(1_000, rng(9))
    assert values.min() >= 200 and values.max() <= 210
    assert 200 <= dist.mean_tokens() <= 210


@settings(max_examples=60, deadline=None)
@given(
    median=st.floats(1.0, 5_000.0),
    sigma=st.floats(0.05, 3.0),
    low=st.integers(1, 500),
    extra=st.integers(0, 5_000),
    seed=st.integers(0, 2**32 - 1),
)
def test_lognormal_samples_always_within_bounds(median, sigma, low, extra, seed):
    dist = LognormalLength(median, sigma, low, low + extra)
    if dist.mass() < 1e-12:
        return
    values = dist.sample(200, rng(seed))
    assert values.dtype == np.int64
    assert values.min() >= low and values.max() <= low + extra


def test_invalid_parameters_are_rejected():
    with pytest.raises(ValueError):
        FixedLength(0)
    with pytest.raises(ValueError):
        UniformLength(10, 5)
    with pytest.raises(ValueError):
        LognormalLength(100.0, 1.0, 50, 10)


def empirical(column: str) -> EmpiricalLength:
    table = read_trace(TRACES / "arxiv_summarization_lengths_2k.csv")
    if column == "prompt_tokens":
        return EmpiricalLength(
            table.prompt_tokens, table.path, table.format, column, table.output_tokens
        )
    return EmpiricalLength(
        table.output_tokens, table.path, table.format, column, table.prompt_tokens
    )


def test_empirical_resamples_the_pool():
    dist = empirical("prompt_tokens")
    values = dist.sample(100_000, rng(10))
    assert set(np.unique(values)) <= set(dist.values_tokens.tolist())
    assert values.mean() == pytest.approx(dist.mean_tokens(), rel=0.01)
    assert dist.mean_tokens() == pytest.approx(2539.8825)  # mean of the slice's 2,000 prompts


def test_two_empirical_columns_of_one_trace_draw_whole_rows():
    prompt, output = empirical("prompt_tokens"), empirical("output_tokens")
    assert prompt.pairs_with(output)
    p, o = sample_length_pairs(prompt, output, 5_000, rng(11), rng(12))
    rows = set(zip(prompt.values_tokens.tolist(), output.values_tokens.tolist(), strict=True))
    assert all(pair in rows for pair in zip(p.tolist(), o.tolist(), strict=True))


def test_independent_pairs_otherwise():
    p, o = sample_length_pairs(FixedLength(3), UniformLength(1, 9), 1_000, rng(1), rng(2))
    assert np.all(p == 3) and o.min() >= 1 and o.max() <= 9


def test_a_tables_names_are_its_texts_with_one_object_per_distinct_text():
    classes = ["premium", "default", "premium", "default", "premium"]
    table = RequestTable(
        arrival_s=np.arange(5, dtype=float),
        prompt_tokens=np.full(5, 8),
        output_tokens=np.full(5, 4),
        slo_class=np.array(classes, dtype=object),
        origin=np.array(["phones", "", "phones", "laptops", ""]),
        category=np.array([""] * 5),
        slos={
            "default": SloTargets(ttft_ms=1000.0, tpot_ms=100.0),
            "premium": SloTargets(ttft_ms=500.0, tpot_ms=50.0),
        },
    )
    names = table.slo_class_names()
    assert names == classes
    assert all(type(name) is str for name in names)
    assert len({id(name) for name in names}) == 2
    origins = table.origin_names()
    assert origins == ["phones", "", "phones", "laptops", ""]
    assert len({id(name) for name in origins}) == 3
    assert table.category_names() == [""] * 5
