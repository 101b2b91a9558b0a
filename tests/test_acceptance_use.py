"""Acceptance by task category, temperature and request level; curves used only as measured.

Model level: category bins, the per-request spread's levels (mean-preserving
per position; tokens per verify up by the convexity). Run level: the mean
tokens per verify over requests with a spread against the levels' analytic
mean; the scenario refusals of ``simulator.scenario.sections.acceptance_use``.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import integrate, stats

from simulator import load_scenario, run
from simulator.acceptance import build_acceptance_model
from simulator.acceptance.protocol import RequestTraits
from simulator.acceptance.spread import SPREAD_LEVELS, stratum_mean
from simulator.errors import InputError
from simulator.rng import RandomStreams, RequestUniforms
from tests.engine_fixtures import synthetic, write_scenario

CHAIN = {"kind": "chain"}


def curve_doc(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "method": "test",
        "kind": "iid",
        "topology": CHAIN,
        "source": "test fixture",
        "bins": [{"alpha": 0.6}],
    }
    doc.update(fields)
    return doc


def curve(**fields: Any) -> Any:
    return build_acceptance_model(curve_doc(**fields), Path("c.yaml"))


def traits(category: str = "", quantile: float = 0.5, request_id: int = 0) -> RequestTraits:
    return RequestTraits(request_id, category, quantile)


# -- model level ------------------------------------------------------------------------


def test_categories_answer_for_their_requests() -> None:
    model = curve(categories={"math": [{"alpha": 0.8}], "qa": [{"alpha": 0.4}]})
    assert model.categories == ("math", "qa")
    assert model.for_request(traits("math")).expected_tokens_per_verify(4, 0) == pytest.approx(
        (1 - 0.8**5) / 0.2
    )
    assert model.for_request(traits("qa")).expected_accepted(1, 0) == pytest.approx(0.4)
    # No category: the curve's own bins.
    assert model.for_request(traits("")) is model
    with pytest.raises(ValueError, match="no bins for category 'rag'; it has math, qa"):
        model.for_request(traits("rag"))


def test_a_curve_without_categories_serves_every_category() -> None:
    model = curve()
    assert model.for_request(traits("math")) is model


def test_category_bins_are_checked_like_bins() -> None:
    with pytest.raises(InputError) as caught:
        curve(categories={"math": [{"alpha": 0.5, "temperature": 1}, {"alpha": 0.5}]})
    assert "categories.math[1].temperature: bins out of order" in str(caught.value)
    with pytest.raises(InputError, match="categories: wrong format"):
        curve(categories={"Math": [{"alpha": 0.5}]})


def test_temperatures_gather_every_bin() -> None:
    model = curve(
        bins=[{"alpha": 0.6}, {"alpha": 0.4, "temperature": 1.0}],
        categories={"math": [{"alpha": 0.7, "temperature": 0.5}]},
    )
    assert model.temperatures == (0.0, 0.5, 1.0)
    # Linear between temperature bins (one bin per temperature: E[A] at k = 1 is alpha).
    assert model.expected_accepted(1, 0, 0.25) == pytest.approx(0.55)


def test_stratum_means_average_to_the_rate() -> None:
    for rate in (0.1, 0.55, 0.93):
        for concentration in (0.5, 4.0, 50.0):
            levels = [stratum_mean(rate, concentration, level) for level in range(SPREAD_LEVELS)]
            assert np.mean(levels) == pytest.approx(rate, abs=1e-9)
            assert levels == sorted(levels)
    assert stratum_mean(1.0, 2.0, 0) == 1.0
    assert stratum_mean(0.0, 2.0, 31) == 0.0


@pytest.mark.parametrize("concentration", [0.05, 0.3, 2.0, 8.335493, 100.0])
@pytest.mark.parametrize("rate", [1e-6, 1e-3, 0.01, 0.05, 0.95, 0.99, 0.999, 1 - 1e-6])
def test_stratum_means_keep_an_extreme_rate(rate: float, concentration: float) -> None:
    """Rates near 0 or 1 with a small concentration: the strata still average to the rate.

    There the Beta's quantiles lie closer to 0 or 1 than a double tells apart. Before,
    the upper strata were computed from the mirrored variable's quantiles, which rounded
    to 1: a stratum then came out as 1.0 instead of about 0. With the ngram curve's
    concentration (8.34) a rate of 0.001 averaged 0.22, and 0.999 averaged 0.78.
    """
    levels = [stratum_mean(rate, concentration, level) for level in range(SPREAD_LEVELS)]
    assert np.mean(levels) == pytest.approx(rate, rel=1e-8)
    assert all(low <= high + 1e-12 for low, high in pairwise(levels))


def test_the_largest_concentration_allowed_still_keeps_the_rate() -> None:
    """The schemas' bound 1e10 on a concentration: accurate up to it, not far beyond it."""
    from simulator.loading import load_packaged_schema

    scenario = load_packaged_schema("scenario.schema.json")
    spread = scenario["properties"]["speculation"]["properties"]["request_spread"]["oneOf"]
    curve_schema = load_packaged_schema("acceptance.schema.json")["properties"]
    bounds = {
        next(form["maximum"] for form in spread if form.get("type") == "number"),
        curve_schema["request_spread"]["properties"]["concentration"]["maximum"],
    }
    assert bounds == {1e10}

    def worst(concentration: float) -> float:
        return max(
            abs(stratum_mean(rate, concentration, level) - rate)
            for rate in (0.05, 0.5, 0.7, 0.99)
            for level in range(SPREAD_LEVELS)
        )

    assert worst(1e10) < 1e-4
    assert worst(1e14) > 0.1
    assert not worst(1e18) < 0.1  # NaN or far off


def test_spread_keeps_each_positions_mean_rate() -> None:
    model = curve(kind="positional", bins=[{"rates": [0.8, 0.6, 0.9]}])
    views = [
        model.for_request(traits(quantile=(level + 0.5) / SPREAD_LEVELS), 3.0)
        for level in range(SPREAD_LEVELS)
    ]
    # Per-position conditional rates average to the curve's.
    survival = np.array([view.survival(3, 0) for view in views])
    conditional = survival / np.column_stack([np.ones(len(views)), survival[:, :-1]])
    assert conditional.mean(axis=0) == pytest.approx([0.8, 0.6, 0.9], abs=1e-9)


@pytest.mark.parametrize(("alpha", "concentration", "k"), [(0.6, 4.0, 4), (0.8, 2.0, 6)])
def test_spread_raises_tokens_per_verify_as_the_convexity_predicts(
    alpha: float, concentration: float, k: int
) -> None:
    model = curve(bins=[{"alpha": alpha}])
    levels = [
        model.for_request(traits(quantile=(level + 0.5) / SPREAD_LEVELS), concentration)
        for level in range(SPREAD_LEVELS)
    ]
    spread_mean = float(np.mean([v.expected_tokens_per_verify(k, 0) for v in levels]))
    plain = model.expected_tokens_per_verify(k, 0)

    # E[f(X)] of the continuous Beta, f(a) = 1 + a + ... + a^k (convex).
    beta = stats.beta(alpha * concentration, (1 - alpha) * concentration)
    continuous, _ = integrate.quad(
        lambda a: sum(a**i for i in range(k + 1)) * beta.pdf(a), 0.0, 1.0, limit=200
    )
    assert spread_mean > plain  # Jensen: f convex.
    # 32 strata keep almost all of the variance the convexity works on.
    assert spread_mean - plain == pytest.approx(continuous - plain, rel=0.03)


def test_request_uniforms_do_not_depend_on_the_order_of_asking() -> None:
    forward = RequestUniforms(RandomStreams(7), "acceptance_levels", block=16)
    backward = RequestUniforms(RandomStreams(7), "acceptance_levels", block=16)
    ids = list(range(100))
    first = [forward.at(i) for i in ids]
    second = [backward.at(i) for i in reversed(ids)][::-1]
    assert first == second
    assert len(set(first)) == 100
    assert all(0.0 <= u < 1.0 for u in first)


# -- run level -----------------------------------------------------------------------------


def write_curve(path: Path, **fields: Any) -> Path:
    path.write_text(yaml.safe_dump(curve_doc(**fields)))
    return path


def fused_scenario(tmp_path: Path, workload: dict[str, Any], **extra: Any) -> Path:
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=workload,
        extra={f"speculation.{k}": v for k, v in extra.items()},
    )
    write_curve(tmp_path / "acc.yaml", bins=[{"alpha": 0.6}])
    return path


@pytest.mark.slow
def test_a_run_with_spread_matches_the_levels_mean_tokens_per_verify(tmp_path: Path) -> None:
    concentration, k = 3.0, 4
    path = fused_scenario(
        tmp_path, synthetic(400, 2.0, 100, 400), k=k, request_spread=concentration
    )
    requests = run(load_scenario(path)).requests
    done = requests[requests["verify_rounds"] > 0]
    per_request = (done["generated_tokens"] - 1) / done["verify_rounds"]

    model = curve(bins=[{"alpha": 0.6}])
    levels = [
        model.for_request(traits(quantile=(level + 0.5) / SPREAD_LEVELS), concentration)
        for level in range(SPREAD_LEVELS)
    ]
    predicted = float(np.mean([v.expected_tokens_per_verify(k, 0) for v in levels]))
    plain = model.expected_tokens_per_verify(k, 0)
    # Outputs of 400 tokens: the cut at the end moves a request's mean by well under 1 %.
    assert per_request.mean() == pytest.approx(predicted, rel=0.03)
    assert per_request.mean() > plain * 1.05
    # Requests differ: the per-request means spread far wider than sampling alone would.
    assert per_request.std() > 0.4


@pytest.mark.slow
def test_categories_split_acceptance_and_reports(tmp_path: Path) -> None:
    workload = synthetic(200, 2.0, 100, 200)
    workload["synthetic"]["category_mix"] = {"math": 1, "qa": 1}
    path = write_scenario(tmp_path, mode="fused", workload=workload)
    write_curve(
        tmp_path / "acc.yaml",
        categories={"math": [{"alpha": 0.85}], "qa": [{"alpha": 0.3}]},
    )
    result = run(load_scenario(path))
    by = result.summary["by_category"]
    assert set(by) == {"math", "qa"}
    assert by["math"]["requests"] + by["qa"]["requests"] == 200
    k = 4
    assert by["math"]["mean_tokens_per_verify"] == pytest.approx(
        (1 - 0.85 ** (k + 1)) / 0.15, rel=0.05
    )
    assert by["qa"]["mean_tokens_per_verify"] == pytest.approx((1 - 0.3 ** (k + 1)) / 0.7, rel=0.05)
    assert by["math"]["tpot_ms_mean"] < by["qa"]["tpot_ms_mean"]
    assert set(result.requests["category"]) == {"math", "qa"}


@pytest.mark.slow
def test_temperature_changes_a_run_with_a_two_temperature_curve(tmp_path: Path) -> None:
    summaries = []
    for temperature in (0.0, 1.0):
        path = write_scenario(
            tmp_path,
            mode="fused",
            workload=synthetic(60, 2.0, 100, 200),
            extra={"speculation.temperature": temperature},
        )
        write_curve(
            tmp_path / "acc.yaml", bins=[{"alpha": 0.8}, {"alpha": 0.4, "temperature": 1.0}]
        )
        summaries.append(run(load_scenario(path)).summary["speculation"])
    assert summaries[0]["mean_tokens_per_verify"] > summaries[1]["mean_tokens_per_verify"] + 1.0


# -- scenario refusals ---------------------------------------------------------------------


def refusal(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    return str(caught.value)


def test_temperature_off_a_single_temperature_curve_is_refused(tmp_path: Path) -> None:
    path = fused_scenario(tmp_path, synthetic(5, 1.0, 10, 10), temperature=0.7)
    message = refusal(path)
    assert "speculation.temperature: temperature curve 'acc' was not measured at" in message
    assert "got 0.7; allowed: 0: curve 'acc' holds one temperature" in message


def test_a_tree_curve_for_chains_needs_the_conversion_rule(tmp_path: Path) -> None:
    path = fused_scenario(tmp_path, synthetic(5, 1.0, 10, 10))
    write_curve(tmp_path / "acc.yaml", topology={"kind": "tree"})
    message = refusal(path)
    assert "curve 'acc' was measured on tree and the run drafts chains" in message
    assert "speculation.acceptance_conversion: tree_as_chain" in message
    path = fused_scenario(
        tmp_path, synthetic(5, 1.0, 10, 10), acceptance_conversion="tree_as_chain"
    )
    write_curve(tmp_path / "acc.yaml", topology={"kind": "tree"})
    assert load_scenario(path).speculation.acceptance_conversion == "tree_as_chain"


def test_a_conversion_rule_no_curve_needs_is_refused(tmp_path: Path) -> None:
    path = fused_scenario(
        tmp_path, synthetic(5, 1.0, 10, 10), acceptance_conversion="chain_as_tree"
    )
    assert "speculation.acceptance_conversion: conversion rule that no curve needs" in refusal(path)


def test_a_workload_category_the_curve_lacks_is_refused(tmp_path: Path) -> None:
    workload = synthetic(5, 1.0, 10, 10)
    workload["synthetic"]["category_mix"] = {"math": 1, "rag": 2}
    path = write_scenario(tmp_path, mode="fused", workload=workload)
    write_curve(tmp_path / "acc.yaml", categories={"math": [{"alpha": 0.7}]})
    message = refusal(path)
    assert "workload.synthetic.category_mix: task category without acceptance data" in message
    assert "got 'rag'" in message


def test_spread_from_a_curve_without_one_is_refused(tmp_path: Path) -> None:
    path = fused_scenario(tmp_path, synthetic(5, 1.0, 10, 10), request_spread="from_curve")
    assert "curve 'acc' has no fitted request_spread" in refusal(path)


def test_fitted_spread_with_modelled_categories_is_refused(tmp_path: Path) -> None:
    workload = synthetic(5, 1.0, 10, 10)
    workload["synthetic"]["category_mix"] = {"math": 1}
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=workload,
        extra={"speculation.request_spread": "from_curve"},
    )
    write_curve(
        tmp_path / "acc.yaml",
        categories={"math": [{"alpha": 0.7}]},
        request_spread={"distribution": "beta", "concentration": 9.0, "fitted_to": "test"},
    )
    assert "between-category spread counted twice" in refusal(path)


def test_trace_categories_are_read_and_checked(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "arrival_s,prompt_tokens,output_tokens,category\n0,10,5,math\n1,10,5,\n2,10,5,Bad name\n"
    )
    workload = {"source": "trace://t.csv", "slo": {"ttft_ms": 1000, "tpot_ms": 100}}
    path = write_scenario(tmp_path, mode="fused", workload=workload)
    write_curve(tmp_path / "acc.yaml")
    message = refusal(path)
    assert "row 3, column category: malformed category (first row naming it)" in message
    trace.write_text("arrival_s,prompt_tokens,output_tokens,category\n0,10,5,math\n1,10,5,\n")
    requests = run(load_scenario(path)).requests
    assert requests["category"].tolist() == ["math", ""]


@pytest.mark.slow
def test_adaptive_k_follows_each_requests_own_acceptance(tmp_path: Path) -> None:
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(150, 1.0, 100, 300),
        extra={
            "speculation.request_spread": 1.0,
            "speculation.adaptive_k": {"enabled": True, "controller": "goodput", "k_max": 8},
        },
    )
    write_curve(tmp_path / "acc.yaml", bins=[{"alpha": 0.6}])
    requests = run(load_scenario(path)).requests
    done = requests[requests["verify_rounds"] > 5]
    mean_k = done["drafted_tokens"] / done["verify_rounds"]
    acceptance = done["accepted_tokens"] / done["drafted_tokens"]
    # Easy requests get longer drafts: the controller reads the request's own acceptance.
    assert np.corrcoef(acceptance, mean_k)[0, 1] > 0.5


REPLAY_CURVE = "builtin:acceptance/replay/eagle_vicuna-7b_specbench.yaml"


@pytest.mark.slow
def test_a_run_replays_each_requests_logged_sequence(tmp_path: Path) -> None:
    from simulator.acceptance import load_acceptance_model
    from simulator.builtin_data import builtin_path

    k = 4
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(40, 1.0, 100, 120),
        k=k,
        extra={
            "speculation.acceptance_models": [{"name": "acc", "file": REPLAY_CURVE}],
            "speculation.acceptance_conversion": "tree_as_chain",
        },
    )
    result = run(load_scenario(path))
    model = load_acceptance_model(builtin_path(REPLAY_CURVE))
    levels = RequestUniforms(RandomStreams(1), "acceptance_levels")
    for row in result.requests.itertuples():
        session = model.for_request(RequestTraits(row.request_id, "", levels.at(row.request_id)))
        steps = session.model.log.steps[session.index]
        # The engine's rounds: k, cut so as never to draft past the output; the logged
        # step of round i (starting over at the end), truncated at the round's k.
        generated, accepted, rounds = 1, 0, 0
        while generated < row.output_tokens:
            drafted = max(1, min(k, row.output_tokens - generated - 1))
            taken = min(steps[rounds % len(steps)], drafted)
            generated += min(taken + 1, row.output_tokens - generated)
            accepted += taken
            rounds += 1
        assert (row.verify_rounds, row.accepted_tokens) == (rounds, accepted)


def test_a_replayed_curve_refuses_longer_drafts_and_a_spread(tmp_path: Path) -> None:
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(5, 1.0, 10, 10),
        k=6,
        extra={
            "speculation.acceptance_models": [{"name": "acc", "file": REPLAY_CURVE}],
            "speculation.acceptance_conversion": "tree_as_chain",
            "speculation.request_spread": 2.0,
            "speculation.adaptive_k.k_max": 8,
        },
    )
    message = refusal(path)
    assert "speculation.k: draft length beyond the curve's (got 6; allowed: at most 5" in message
    assert "speculation.request_spread: spread on a replayed curve" in message


def test_the_acceptance_figure_scenarios_load(tmp_path: Path) -> None:
    import importlib.util
    import sys

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location(
        "acceptance_speedup", root / "scripts" / "acceptance_speedup.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, script)
    spec.loader.exec_module(script)
    for drafters in script.GROUPS.values():
        for drafter in drafters:
            path = tmp_path / "s.yaml"
            path.write_text(yaml.safe_dump(script.scenario(2, script.ENGINE, drafter)))
            loaded = load_scenario(path).speculation
            assert loaded.temperature == drafter.temperature
            assert loaded.acceptance_conversion == drafter.conversion


@pytest.mark.slow
def test_from_curve_takes_the_curves_fitted_spread(tmp_path: Path) -> None:
    """request_spread from_curve: each request drafts at its level of the curve's own Beta."""
    spreads = {}
    for choice in ("none", "from_curve"):
        path = write_scenario(
            tmp_path,
            mode="fused",
            workload=synthetic(150, 2.0, 100, 300),
            extra={"speculation.request_spread": choice},
        )
        write_curve(
            tmp_path / "acc.yaml",
            request_spread={"distribution": "beta", "concentration": 2.0, "fitted_to": "test"},
        )
        requests = run(load_scenario(path)).requests
        done = requests[requests["verify_rounds"] > 0]
        spreads[choice] = ((done["generated_tokens"] - 1) / done["verify_rounds"]).std()
    # Without a spread requests differ only by sampling; with the curve's c = 2, far more.
    assert spreads["from_curve"] > 2 * spreads["none"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("request_spread", 2.0), ("acceptance_conversion", "tree_as_chain")],
)
def test_acceptance_keys_are_refused_where_nothing_speculates(
    tmp_path: Path, key: str, value: object
) -> None:
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=synthetic(3, 1.0, 10, 10),
        extra={f"speculation.{key}": value},
    )
    assert f"speculation.{key}: setting that would have no effect" in refusal(path)
