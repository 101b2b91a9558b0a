"""Analytic checks of the engine: Leviathan's speculative decoding formulas and M/G/1."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import load_scenario, run
from simulator.engine.costs import PhaseCost
from simulator.lut import LutKey, LutManager, load_lut
from tests.engine_fixtures import constant, synthetic, write_lut, write_scenario


def leviathan_tokens_per_verify(alpha: float, k: int) -> float:
    return (1 - alpha ** (k + 1)) / (1 - alpha)


@pytest.mark.slow
@pytest.mark.parametrize(("alpha", "k"), [(0.6, 3), (0.8, 5), (0.5, 1)])
def test_tokens_per_verify_matches_leviathan(tmp_path, alpha, k):
    # Long outputs so that capping at the requested length is negligible.
    path = write_scenario(
        tmp_path,
        mode="fused",
        workload=synthetic(60, 0.5, 100, 4000),
        alpha=alpha,
        k=k,
        extra={"speculation.adaptive_k.k_max": 8},
    )
    summary = run(load_scenario(path)).summary
    expected = leviathan_tokens_per_verify(alpha, k)
    assert summary["speculation"]["mean_tokens_per_verify"] == pytest.approx(expected, rel=0.02)
    assert summary["speculation"]["acceptance_rate"] <= 1.0
    # Long outputs: the cut at the end of an output leaves the static k almost everywhere.
    spec = summary["speculation"]
    assert spec["mean_k"] == spec["drafted_tokens"] / spec["verify_steps"]
    assert k - 0.05 < spec["mean_k"] <= k


@pytest.mark.parametrize(("alpha", "k", "c"), [(0.7, 4, 0.1), (0.8, 3, 0.25)])
def test_batch_one_speedup_matches_leviathan(tmp_path, alpha, k, c):
    """Walltime speed-up at batch 1 = (1 - a^(k+1)) / ((1 - a)(k c + 1)).

    One request at a time, no network, target step T independent of context
    and k, draft step c*T: a round costs k c T + T and yields E tokens.
    """
    target_ms = 20.0
    output = 20000
    common = {
        "workload": synthetic(1, 0.001, 64, output),
        "target_phases": {
            "prefill": constant(1.0),
            "draft_decode": constant(target_ms),
            "verify": constant(target_ms),
        },
        "draft_phases": {"prefill": constant(1.0), "draft_decode": constant(c * target_ms)},
        "alpha": alpha,
        "k": k,
    }
    base = run(
        load_scenario(write_scenario(tmp_path, mode="none", name="none.yaml", **common))
    ).requests
    spec = run(
        load_scenario(write_scenario(tmp_path, mode="distributed", name="dist.yaml", **common))
    ).requests
    measured = base["e2e_ms"].iloc[0] / spec["e2e_ms"].iloc[0]
    expected = leviathan_tokens_per_verify(alpha, k) / (k * c + 1)
    assert measured == pytest.approx(expected, rel=0.02)


@pytest.mark.slow
def test_prefill_only_queue_matches_pollaczek_khinchine(tmp_path):
    """Batch size 1, one token per request: the replica is an M/G/1 queue of prefills."""
    rate_per_s = 25.0
    # Prefill service 1 + 0.02 * prompt ms, prompts uniform in [100, 1900]: mean 21 ms.
    workload = synthetic(30000, rate_per_s, 100, 1)
    workload["synthetic"]["prompt_tokens"] = {"dist": "uniform", "low": 100, "high": 1900}
    path = write_scenario(
        tmp_path,
        mode="none",
        workload=workload,
        target_phases={
            "prefill": lambda ctx, b, _k: 1.0 + 0.02 * ctx * b,
            "draft_decode": constant(5.0),
        },
    )
    frame = run(load_scenario(path)).requests
    service_ms = 1.0 + 0.02 * frame["prompt_tokens"].to_numpy(float)
    wait_ms = frame["ttft_server_ms"].to_numpy() - service_ms
    s = service_ms / 1000.0
    # Pollaczek-Khinchine with the realised arrival rate and service moments.
    arrivals_s = np.sort(frame["arrival_s"].to_numpy())
    realised_rate_per_s = (len(arrivals_s) - 1) / (arrivals_s[-1] - arrivals_s[0])
    rho = realised_rate_per_s * s.mean()
    expected_wait_ms = 1000.0 * realised_rate_per_s * np.mean(s**2) / (2 * (1 - rho))
    assert rho == pytest.approx(0.525, abs=0.02)
    # 30,000 customers at rho ~ 0.52 leave about 2 % of sampling noise.
    assert wait_ms.mean() == pytest.approx(expected_wait_ms, rel=0.05)


def test_context_curve_step_sums_match_one_by_one(tmp_path):
    """Summed draft iterations equal adding them one by one, across grid segments too."""
    path = write_lut(
        tmp_path / "lut.csv",
        "m",
        "hw",
        {"draft_decode": lambda c, b, _k: 3.0 + c**0.5 + 0.5 * b},
        contexts=(1, 16, 128, 1024),
    )
    key = LutKey("draft_decode", "m", "hw", 1, 1, "fp16")
    curve = PhaseCost(LutManager([load_lut(path)]), key, "raise").curve(1)
    for context, steps in ((1.0, 5), (10.0, 8), (120.5, 13), (1000.0, 25), (1024.0, 1)):
        one_by_one = [curve.at(context + s) for s in range(steps)]
        lat, energy = curve.sum_steps(context, steps)
        assert lat == pytest.approx(sum(p[0] for p in one_by_one), rel=1e-12)
        assert energy == pytest.approx(sum(p[1] for p in one_by_one), rel=1e-12)
