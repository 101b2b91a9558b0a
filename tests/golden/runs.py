"""Run the example scenarios at test size and pick their key figures."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from simulator import load_scenario, run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "scenarios" / "examples"
GOLDEN_FILE = Path(__file__).with_name("examples.json")

TEST_SIZE: dict[str, list[str]] = {
    "mobile_cloud_distributed": ["workload.duration_s=60"],
    "none_baseline": ["workload.duration_s=60"],
    "datacenter_fused": ["workload.duration_s=60"],
    "low_rtt_distributed": ["workload.max_requests=200"],
    "low_rtt_fused": ["workload.max_requests=200"],
    "hybrid_mix": ["workload.max_requests=200"],
    "design_example": ["workload.duration_s=20"],
}
"""Overrides that shrink each example to a few seconds of wall time."""


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.9g}") if math.isfinite(value) else None
    return value


def key_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures a change to the engine must not move silently."""
    lat = summary["latency_ms"]
    spec = summary["speculation"]
    figures: dict[str, Any] = {
        "requests": summary["requests"],
        "simulated_s": summary["simulated_s"],
        "ttft_p50_ms": lat["ttft"]["p50"],
        "ttft_p99_ms": lat["ttft"]["p99"],
        "tpot_p50_ms": lat["tpot"]["p50"],
        "tpot_p99_ms": lat["tpot"]["p99"],
        "tvt_p50_ms": lat["tvt"]["p50"],
        "e2e_mean_ms": lat["e2e"]["mean"],
        "slo_attainment": summary["goodput"]["slo_attainment"],
        "output_tokens_per_s": summary["throughput"]["output_tokens_per_s"],
        "verify_steps": spec["verify_steps"],
        "acceptance_rate": spec["acceptance_rate"],
        "j_per_output_token": summary["energy"]["j_per_output_token"],
        "usd_per_1k_tokens": summary["cost"]["usd_per_1k_tokens"],
        "gpu_utilization": summary["resources"]["gpu_utilization"],
    }
    return {key: _round(value) for key, value in figures.items()}


def run_example(name: str) -> dict[str, Any]:
    """Run one example at its test size and return its summary."""
    scenario = load_scenario(EXAMPLES / f"{name}.yaml", overrides=TEST_SIZE[name])
    return run(scenario).summary
