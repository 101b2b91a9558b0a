"""The DistServe check: SLO attainment against arrival rate, and the rate at 90 % attainment.

Runs every scenario of :data:`SCENARIOS` (or those named with ``--only``) at every
per-GPU arrival rate of ``--rates`` (a sweep over
``workload.synthetic.arrival.rate_per_s``, set to the per-GPU rate times the
scenario's GPUs), reads each run's ``goodput.slo_attainment`` (TTFT and TPOT
both met, the paper's "both" attainment) and prints one table per scenario and
the per-GPU rate at which attainment crosses :data:`TARGET_ATTAINMENT`,
interpolated linearly between the two rates around the crossing as DistServe's
plotting script does (``evaluation/ae-scripts/e2e/_plot.py``,
``find_intersection``). The case, the paper's numbers and their sources are in
``scenarios/distserve_check/README.md``.

Adding a configuration is adding one entry to :data:`SCENARIOS`.

``--write-lengths`` (re)writes the workload's lengths file
(:data:`LENGTHS_FILE`) from the Azure conversation trace slice with DistServe's
own ShareGPT filter (:func:`opt_lengths`).

Usage::

    python scripts/distserve_check.py [--rates R,R,...] [--requests N] [--seed N]
        [--only NAME] [--workers N] [-o DIR]
    python scripts/distserve_check.py --write-lengths
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import simulator

ROOT = Path(__file__).resolve().parent.parent
CASE_DIR = ROOT / "scenarios" / "distserve_check"
TRACE = ROOT / "scenarios" / "traces" / "azure_conv_10k.csv"
LENGTHS_FILE = CASE_DIR / "azure_conv_opt_lengths.csv"

MAX_TOTAL_TOKENS = 2048
"""DistServe's ShareGPT filter drops a request whose prompt plus output reaches 2048 tokens
(``evaluation/2-benchmark-serving/0-prepare-dataset.py``: OPT's max_position_embeddings)."""

MIN_LENGTH = 4
"""... and one whose prompt and output are both shorter than 4 tokens (same file)."""

TARGET_ATTAINMENT = 0.9
"""The paper's attainment target (``_plot.py``: ``atta_target`` 90)."""

PAPER_RATES_PER_GPU = (0.25, 0.5, 1.0, 1.5, 2.0, 2.25, 2.5, 3.0)
"""Per-GPU rates of DistServe's OPT-13B ShareGPT figure (``_plot.py``, ``plot_fig8_upper``)."""

RATE_KEY = "workload.synthetic.arrival.rate_per_s"


@dataclass(frozen=True)
class Configuration:
    """One configuration of the check.

    Attributes:
        name: Label in the output.
        scenario: Scenario file, relative to the repository root.
        gpus: GPUs the configuration uses (the per-GPU rate is multiplied by it).
    """

    name: str
    scenario: str
    gpus: int


SCENARIOS: tuple[Configuration, ...] = (
    Configuration("colocated", "scenarios/distserve_check/colocated_opt13b_a100.yaml", 2),
    Configuration(
        "colocated_vllm_costs",
        "scenarios/distserve_check/colocated_opt13b_a100_vllm_costs.yaml",
        2,
    ),
    Configuration("disaggregated", "scenarios/distserve_check/disaggregated_opt13b_a100.yaml", 2),
    Configuration(
        "colocated_paged", "scenarios/distserve_check/colocated_opt13b_a100_paged.yaml", 2
    ),
    Configuration(
        "colocated_paged_vllm_costs",
        "scenarios/distserve_check/colocated_opt13b_a100_paged_vllm_costs.yaml",
        2,
    ),
    Configuration(
        "disaggregated_paged", "scenarios/distserve_check/disaggregated_opt13b_a100_paged.yaml", 2
    ),
    Configuration(
        "colocated_paged_3gpu",
        "scenarios/distserve_check/colocated_opt13b_a100_paged_3gpu.yaml",
        3,
    ),
    Configuration(
        "disaggregated_paged_tp2",
        "scenarios/distserve_check/disaggregated_opt13b_a100_paged_tp2.yaml",
        3,
    ),
)
"""The configurations compared: colocated (priced by DistServe's fit, and by its fit of vLLM)
and disaggregated (one prefill and one decode replica, DistServe's fit), each with KV reserved
whole (``scheduler.kv.on_full: queue``) and with KV that grows page by page (``_paged``:
``preempt_recompute``, as vLLM and DistServe hold it); and DistServe's own placement (prefill
at TP 2 and decode at TP 1, 3 GPUs) against three colocated GPUs, with paged KV."""


def opt_lengths(trace: Path = TRACE) -> pd.DataFrame:
    """Prompt and output lengths of ``trace`` that pass DistServe's ShareGPT filter, in order."""
    frame = pd.read_csv(trace)
    prompt = frame["ContextTokens"].astype(int)
    output = frame["GeneratedTokens"].astype(int)
    keep = (prompt + output < MAX_TOTAL_TOKENS) & ~((prompt < MIN_LENGTH) & (output < MIN_LENGTH))
    return pd.DataFrame({"prompt_tokens": prompt[keep], "output_tokens": output[keep]})


def write_lengths(path: Path = LENGTHS_FILE) -> int:
    """Write :func:`opt_lengths` to ``path``; return the number of rows."""
    frame = opt_lengths()
    frame.to_csv(path, index=False, lineterminator="\n")
    return len(frame)


def rate_at(rates: Sequence[float], attainment: Sequence[float], target: float) -> float | None:
    """First rate where attainment crosses ``target``, linear between the two rates around it.

    ``None`` when it never crosses (all above or all below the target).
    """
    for i in range(len(rates) - 1):
        y0, y1 = attainment[i], attainment[i + 1]
        if (y0 < target) != (y1 < target):
            return rates[i] + (target - y0) * (rates[i + 1] - rates[i]) / (y1 - y0)
    return None


def run_configuration(
    config: Configuration,
    rates_per_gpu: Sequence[float],
    requests: int,
    output_dir: Path,
    workers: int | None,
    seed: int | None = None,
) -> pd.DataFrame:
    """Attainment of ``config`` at every per-GPU rate (columns rate_per_gpu, attainment, ...).

    ``seed`` replaces the scenario's seed at every point when given.
    """
    fixed: dict[str, int] = {"workload.synthetic.num_requests": requests}
    if seed is not None:
        fixed["seed"] = seed
    sweep = {
        "sweep_id": f"distserve_check_{config.name}",
        "scenario": str(ROOT / config.scenario),
        "set": fixed,
        "grid": {RATE_KEY: [r * config.gpus for r in rates_per_gpu]},
    }
    table = simulator.sweep(sweep, output_dir / config.name, workers=workers)
    failed = table[table["status"] != "ok"]
    if not failed.empty:
        raise RuntimeError(f"{config.name}: {len(failed)} points failed: {failed['error'].iloc[0]}")
    return pd.DataFrame(
        {
            "rate_per_gpu": list(rates_per_gpu),
            "attainment": table["goodput.slo_attainment"].astype(float).to_list(),
            "ttft_p90_ms": table["latency_ms.ttft.p90"].astype(float).to_list()
            if "latency_ms.ttft.p90" in table
            else None,
            "tpot_p90_ms": table["latency_ms.tpot.p90"].astype(float).to_list()
            if "latency_ms.tpot.p90" in table
            else None,
        }
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rates",
        default=",".join(str(r) for r in PAPER_RATES_PER_GPU),
        help="per-GPU arrival rates, requests/s (default: the paper's)",
    )
    parser.add_argument("--requests", type=int, default=1000, help="requests per run")
    parser.add_argument("--seed", type=int, default=None, help="seed of every run")
    parser.add_argument("--only", action="append", help="run only this configuration")
    parser.add_argument("--workers", type=int, default=None, help="sweep worker processes")
    parser.add_argument("-o", "--output", type=Path, default=None, help="results directory")
    parser.add_argument("--write-lengths", action="store_true", help="rewrite the lengths file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check and print its tables."""
    args = _parser().parse_args(argv)
    if args.write_lengths:
        rows = write_lengths()
        print(f"wrote {rows} rows to {LENGTHS_FILE.relative_to(ROOT)}")
        return 0
    rates = [float(r) for r in args.rates.split(",")]
    configs = [c for c in SCENARIOS if not args.only or c.name in args.only]
    if not configs:
        print(f"--only: no configuration named {args.only}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        output = args.output or Path(scratch)
        for config in configs:
            table = run_configuration(config, rates, args.requests, output, args.workers, args.seed)
            print(f"## {config.name} ({config.gpus} GPUs, {config.scenario})")
            print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            crossing = rate_at(rates, table["attainment"].to_list(), TARGET_ATTAINMENT)
            text = "not crossed in the swept range" if crossing is None else f"{crossing:.3f}"
            print(f"per-GPU rate at {TARGET_ATTAINMENT:.0%} attainment: {text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
