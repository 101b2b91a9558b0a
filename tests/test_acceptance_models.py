"""Sampling and closed forms of the acceptance models (iid, per_k, positional)."""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.acceptance import (
    AcceptanceModel,
    IidModel,
    PerKModel,
    PositionalModel,
    build_acceptance_model,
    iid_expected_tokens,
    solve_alpha,
    unconditional_to_conditional,
)

FILE = Path("curve.yaml")


def make(kind: str, bins: list[dict[str, Any]], **extra: Any) -> Any:
    document = {
        "method": "test",
        "kind": kind,
        "topology": {"kind": "chain"},
        "bins": bins,
        "source": "unit test",
        **extra,
    }
    return build_acceptance_model(document, FILE)


def iid(alpha: float) -> IidModel:
    model = make("iid", [{"alpha": alpha}])
    assert isinstance(model, IidModel)
    return model


# --- iid -------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.8, 0.95])
@pytest.mark.parametrize("k", [1, 3, 5, 8])
def test_iid_sample_mean_matches_leviathan_formula(alpha: float, k: int) -> None:
    model = iid(alpha)
    closed = (1 - alpha ** (k + 1)) / (1 - alpha)
    assert model.expected_tokens_per_verify(k, 100) == pytest.approx(closed, rel=1e-12)
    assert iid_expected_tokens(alpha, k) == pytest.approx(closed, rel=1e-12)
    rng = np.random.default_rng(1234 + k)
    samples = model.sample_accepted_many(k, 100, 200_000, rng)
    assert abs((samples.mean() + 1) / closed - 1) < 0.01
    # The whole distribution is truncated geometric: P(A = a) = alpha^a (1 - alpha), a < k.
    counts = np.bincount(samples, minlength=k + 1) / samples.size
    expected = [alpha**a * (1 - alpha) for a in range(k)] + [alpha**k]
    assert counts == pytest.approx(expected, abs=0.005)


def test_iid_edge_probabilities() -> None:
    rng = np.random.default_rng(0)
    always = iid(1.0)
    never = iid(0.0)
    assert always.expected_tokens_per_verify(6, 10) == 7.0
    assert never.expected_tokens_per_verify(6, 10) == 1.0
    assert set(always.sample_accepted_many(6, 10, 1000, rng).tolist()) == {6}
    assert set(never.sample_accepted_many(6, 10, 1000, rng).tolist()) == {0}
    assert always.expected_accepted(0, 10) == 0.0
    assert always.sample_accepted(0, 10, rng) == 0


def test_iid_context_bins_interpolate_the_distribution_linearly() -> None:
    model = make("iid", [{"context_len": 100, "alpha": 0.9}, {"context_len": 300, "alpha": 0.5}])
    k = 4
    low, high = iid_expected_tokens(0.9, k), iid_expected_tokens(0.5, k)
    assert model.expected_tokens_per_verify(k, 100) == pytest.approx(low)
    assert model.expected_tokens_per_verify(k, 150) == pytest.approx(0.75 * low + 0.25 * high)
    assert model.expected_tokens_per_verify(k, 300) == pytest.approx(high)
    # Clamped outside the bins.
    assert model.expected_tokens_per_verify(k, 0) == pytest.approx(low)
    assert model.expected_tokens_per_verify(k, 10_000) == pytest.approx(high)
    survival = model.survival(k, 200)
    assert survival == pytest.approx([0.5 * (0.9**i + 0.5**i) for i in range(1, k + 1)])


def test_temperature_groups_interpolate_and_clamp() -> None:
    model = make(
        "iid",
        [
            {"temperature": 0.0, "context_len": 0, "alpha": 0.8},
            {"temperature": 0.0, "context_len": 1000, "alpha": 0.6},
            {"temperature": 1.0, "alpha": 0.4},
        ],
    )
    k = 3
    at_zero = model.expected_accepted(k, 500, 0.0)
    greedy_mid = 0.5 * (iid_expected_tokens(0.8, k) + iid_expected_tokens(0.6, k)) - 1
    assert at_zero == pytest.approx(greedy_mid)
    hot = iid_expected_tokens(0.4, k) - 1
    assert model.expected_accepted(k, 500, 1.0) == pytest.approx(hot)
    assert model.expected_accepted(k, 500, 2.0) == pytest.approx(hot)
    assert model.expected_accepted(k, 500, 0.25) == pytest.approx(0.75 * greedy_mid + 0.25 * hot)


# --- per_k -----------------------------------------------------------------

SPEC_TABLE = [
    {"context_len": 128, "acceptance": {"k=1": 0.92, "k=2": 0.85, "k=4": 0.72}},
    {"context_len": 512, "acceptance": {"k=1": 0.89, "k=2": 0.78, "k=4": 0.63}},
]


@pytest.mark.parametrize(
    ("context_len", "k", "fraction"),
    [
        (128, 1, 0.92),
        (128, 2, 0.85),
        (128, 4, 0.72),
        (512, 1, 0.89),
        (512, 2, 0.78),
        (512, 4, 0.63),
    ],
)
def test_per_k_reproduces_the_table(context_len: int, k: int, fraction: float) -> None:
    model = make("per_k", SPEC_TABLE)
    assert isinstance(model, PerKModel)
    assert model.expected_accepted(k, context_len) == pytest.approx(k * fraction, rel=1e-9)
    samples = model.sample_accepted_many(k, context_len, 200_000, np.random.default_rng(k))
    assert samples.mean() / k == pytest.approx(fraction, abs=0.004)


def test_per_k_interpolation_in_k_and_context_and_outside_rules() -> None:
    model = make("per_k", SPEC_TABLE)
    # k=3 lies between 2 and 4: E[A] is linear in k.
    assert model.expected_accepted(3, 128) == pytest.approx(0.5 * (2 * 0.85 + 4 * 0.72))
    # Halfway in context: the mean of the two bins.
    assert model.expected_accepted(4, 320) == pytest.approx(0.5 * (4 * 0.72 + 4 * 0.63))
    # Above the table the alpha solved at k=4 is kept.
    alpha_4 = solve_alpha(4 * 0.72, 4)
    assert sum(alpha_4**i for i in range(1, 5)) == pytest.approx(2.88, rel=1e-12)
    assert model.expected_accepted(6, 128) == pytest.approx(sum(alpha_4**i for i in range(1, 7)))
    assert model.expected_accepted(0, 128) == 0.0


def test_per_k_below_smallest_k_uses_alpha_of_smallest_k() -> None:
    model = make("per_k", [{"acceptance": {3: 0.7, 5: 0.6}}])
    alpha_3 = solve_alpha(2.1, 3)
    assert model.expected_accepted(1, 0) == pytest.approx(alpha_3)
    assert model.expected_accepted(2, 0) == pytest.approx(alpha_3 + alpha_3**2)


def test_per_k_accepts_both_key_spellings() -> None:
    spelled = make("per_k", [{"acceptance": {"k=2": 0.8, "k=4": 0.6}}])
    plain = make("per_k", [{"acceptance": {2: 0.8, "4": 0.6}}])
    for k in range(7):
        assert spelled.expected_accepted(k, 0) == plain.expected_accepted(k, 0)
    assert plain.bins[0].table == ((2, 0.8), (4, 0.6))


def test_solve_alpha_bounds() -> None:
    assert solve_alpha(0.0, 4) == 0.0
    assert solve_alpha(4.0, 4) == 1.0
    assert solve_alpha(0.5, 1) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="k must be >= 1"):
        solve_alpha(0.5, 0)


# --- positional ------------------------------------------------------------


def test_positional_reproduces_sum_of_products() -> None:
    rates = [0.8, 0.6, 0.9]
    model = make("positional", [{"rates": rates}])
    assert isinstance(model, PositionalModel)
    for k in range(7):
        products = [math.prod((rates + [rates[-1]] * 10)[: i + 1]) for i in range(k)]
        assert model.expected_accepted(k, 0) == pytest.approx(sum(products))
    k = 6
    samples = model.sample_accepted_many(k, 0, 200_000, np.random.default_rng(7))
    assert samples.mean() == pytest.approx(model.expected_accepted(k, 0), rel=0.01)
    # P(A >= 2) = p1 * p2.
    assert np.mean(samples >= 2) == pytest.approx(0.48, abs=0.004)


def test_unconditional_to_conditional() -> None:
    shares = (0.81, 0.74, 0.70)
    rates = unconditional_to_conditional(shares)
    assert rates == pytest.approx((0.81, 0.74 / 0.81, 0.70 / 0.74))
    assert unconditional_to_conditional((0.5, 0.0, 0.0)) == (0.5, 0.0, 0.0)
    model = make("positional", [{"rates": list(rates)}])
    assert model.expected_accepted(3, 0) == pytest.approx(sum(shares))


# --- common behaviour ------------------------------------------------------


def test_models_satisfy_the_protocol_and_metadata() -> None:
    model = make("iid", [{"alpha": 0.5}], name="mine", target_model="t")
    assert isinstance(model, AcceptanceModel)
    assert isinstance(model, IidModel)
    assert model.name == "mine"
    assert model.method == "test"
    assert model.info.target_model == "t"
    assert make("iid", [{"alpha": 0.5}]).name == "curve"  # the file stem


def test_same_seed_same_samples_and_many_equals_single_calls() -> None:
    model = make("positional", [{"rates": [0.9, 0.7, 0.5]}])
    first = [model.sample_accepted(5, 64, np.random.default_rng(42)) for _ in range(3)]
    assert len(set(first)) == 1
    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    singles = [model.sample_accepted(5, 64, rng_a) for _ in range(500)]
    many = model.sample_accepted_many(5, 64, 500, rng_b)
    assert many.tolist() == singles
    assert many.dtype == np.int64
    # One uniform per call: both generators end in the same state.
    assert rng_a.random() == rng_b.random()


def test_negative_arguments_are_programming_errors() -> None:
    model = iid(0.5)
    with pytest.raises(ValueError, match="k must be >= 0"):
        model.expected_accepted(-1, 0)
    with pytest.raises(ValueError, match="n must be >= 0"):
        model.sample_accepted_many(3, 0, -1, np.random.default_rng(0))


def test_single_draw_is_fast() -> None:
    model = make("per_k", SPEC_TABLE)
    rng = np.random.default_rng(3)
    model.sample_accepted(4, 300, rng)
    start = time.perf_counter()
    for _ in range(20_000):
        model.sample_accepted(4, 300, rng)
    assert time.perf_counter() - start < 1.0


def test_cache_reset_keeps_results() -> None:
    # Context bins, so that every context of the loop is a query of its own.
    model = make("iid", [{"context_len": 0, "alpha": 0.7}, {"context_len": 100, "alpha": 0.7}])
    model.cache_limit = 4  # type: ignore[misc]
    values = [model.expected_accepted(3, c) for c in range(1, 11)]
    assert values == [pytest.approx(0.7 + 0.49 + 0.343)] * 10
    assert 1 <= len(model._prepared) <= 4


def test_contexts_beyond_the_bins_share_one_cached_query() -> None:
    """Outside the bins' context span the weights are those of its ends: one entry each."""
    rng_one, rng_two = np.random.default_rng(5), np.random.default_rng(5)
    flat = iid(0.6)  # no context bins: every context weighs the one bin
    contexts = range(100, 3100, 100)
    draws = [flat.sample_accepted(4, context, rng_one) for context in contexts]
    assert len(flat._prepared) == 1
    fresh = [iid(0.6).sample_accepted(4, context, rng_two) for context in contexts]
    assert draws == fresh
    binned = make("iid", [{"context_len": 100, "alpha": 0.9}, {"context_len": 300, "alpha": 0.5}])
    for context in [0, 50, 100, 101, 200, 299, 300, 301, 5000]:
        assert binned.survival(4, context) == make(
            "iid", [{"context_len": 100, "alpha": 0.9}, {"context_len": 300, "alpha": 0.5}]
        ).survival(4, context)
    # 0, 50 and 100 share the low end's entry; 300, 301 and 5000 the high end's.
    assert len(binned._prepared) == 5


# --- properties ------------------------------------------------------------

probabilities = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def any_model(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["iid", "per_k", "positional"]))
    contexts = sorted(draw(st.sets(st.integers(0, 5000), min_size=1, max_size=3)))
    bins: list[dict[str, Any]] = []
    for context_len in contexts:
        if kind == "iid":
            bins.append({"context_len": context_len, "alpha": draw(probabilities)})
        elif kind == "positional":
            rates = draw(st.lists(probabilities, min_size=1, max_size=6))
            bins.append({"context_len": context_len, "rates": rates})
        else:
            ks = sorted(draw(st.sets(st.integers(1, 10), min_size=1, max_size=4)))
            # Shares far below any real acceptance would underflow once scaled by ks[0] / k.
            shares = st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1.0))
            means = sorted(draw(st.lists(shares, min_size=len(ks), max_size=len(ks))))
            # Non-decreasing E[A] with E[A] <= k: scale cumulative shares by k.
            table = {f"k={k}": min(1.0, m * ks[0] / k) for k, m in zip(ks, means, strict=True)}
            bins.append({"context_len": context_len, "acceptance": table})
    return make(kind, bins)


@settings(max_examples=60, deadline=None)
@given(
    model=any_model(),
    k=st.integers(0, 16),
    context_len=st.integers(0, 8000),
    temperature=st.floats(0.0, 2.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_samples_stay_within_zero_and_k(
    model: Any, k: int, context_len: int, temperature: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    single = model.sample_accepted(k, context_len, rng, temperature)
    assert 0 <= single <= k
    many = model.sample_accepted_many(k, context_len, 200, rng, temperature)
    assert many.min(initial=0) >= 0
    assert many.max(initial=0) <= k
    expected = model.expected_accepted(k, context_len, temperature)
    assert -1e-12 <= expected <= k + 1e-12
    survival = model.survival(k, context_len, temperature)
    assert len(survival) == k
    assert all(a >= b for a, b in itertools.pairwise(survival))
    assert all(0.0 <= s <= 1.0 for s in survival)


def test_per_k_rounding_of_equal_expected_tokens_is_not_a_decrease():
    # 0.437888 / 3 rounds so that 3 * value falls one ulp below 0.437888.
    value = 0.437888 / 3
    assert 3 * value < 0.437888
    model = make("per_k", [{"context_len": 0, "acceptance": {"k=1": 0.437888, "k=3": value}}])
    assert model.expected_accepted(3, 0) == pytest.approx(0.437888)
