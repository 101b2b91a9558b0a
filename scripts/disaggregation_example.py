"""Run the disaggregation example on the same GPUs, colocated and disaggregated, and print what changed.

Usage::

    python scripts/disaggregation_example.py [--set KEY=VALUE ...]

Runs the six scenarios of ``scenarios/disaggregation/`` (:data:`SCENARIOS`):
four Llama-3.1-8B H100 replicas colocated, and split two prefill + two
decode, each without speculation, with fused speculation and with distributed
speculation (workstations drafting, the replicas verifying: in the split
fleet, the decode replicas). Prints one row per run (markdown): TTFT and TPOT
p50 and p99, TVT p50 (distributed rounds), SLO attainment, goodput,
GPU-hours, KV bytes moved and each role's GPU utilisation. ``--set``
overrides apply to every run. The figures in
``scenarios/disaggregation/README.md`` are its output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator import load_scenario, run  # noqa: E402
from simulator.cli_support import run_guarded  # noqa: E402

FOLDER = ROOT / "scenarios" / "disaggregation"
SCENARIOS = (
    "colocated",
    "disaggregated",
    "colocated_fused",
    "disaggregated_fused",
    "colocated_distributed",
    "disaggregated_distributed",
)
"""The example's scenario files (without ``.yaml``), in the order printed."""

HEADER = (
    "| run | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | SLO attainment | "
    "goodput req/s | GPU-hours | KV moved GB | prefill util | decode util | TVT p50 ms |\n"
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def row(label: str, summary: dict[str, Any]) -> str:
    """One markdown table row of a run's figures."""
    latency = summary["latency_ms"]
    ttft, tpot = latency["ttft"], latency["tpot"]
    goodput = summary["goodput"]
    section = summary.get("disaggregation")
    if section is not None:
        moved = f"{section['kv_bytes_moved'] / 1e9:,.1f}"
        roles = section["by_role"]
        prefill = f"{roles['prefill']['gpu_utilization']:.1%}"
        decode = f"{roles['decode']['gpu_utilization']:.1%}"
    else:
        moved = prefill = decode = "-"
    tvt = latency["tvt"]["p50"]  # None without distributed rounds
    tvt_p50 = f"{tvt:,.1f}" if tvt is not None else "-"
    return (
        f"| {label} | {ttft['p50']:,.1f} | {ttft['p99']:,.1f} | {tpot['p50']:,.2f} | "
        f"{tpot['p99']:,.2f} | {goodput['slo_attainment']:.1%} | "
        f"{goodput['requests_per_s']:.3f} | {summary['resources']['gpu_hours']:.4f} | "
        f"{moved} | {prefill} | {decode} | {tvt_p50} |"
    )


def main(argv: list[str] | None = None) -> int:
    """Run every scenario of the example and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    print(HEADER)
    for name in SCENARIOS:
        scenario = load_scenario(FOLDER / f"{name}.yaml", overrides=args.set)
        print(row(scenario.metadata.label or name, run(scenario).summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
