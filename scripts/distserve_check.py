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

``--export-requests DIR`` also writes the requests offered to each run (arrival,
prompt and output length, in arrival order) as
``DIR/<configuration>/rate_<per-GPU rate>.json`` in the custom-workload format
of DistServe's own simulator (``simdistserve/benchmarks/simulate_dist.py``,
``--arrival custom --workload FILE``: a list of ``start_time`` in seconds,
``prompt_len`` and ``output_len``), so that simulator can be run on exactly the
same request streams (README.md in the folder, "Against DistServe's own
simulator").

``--write-lengths`` (re)writes the workload's lengths file
(:data:`LENGTHS_FILE`) from the Azure conversation trace slice with DistServe's
own ShareGPT filter (:func:`opt_lengths`).

Usage::

    python scripts/distserve_check.py [--rates R,R,...] [--requests N] [--seed N]
        [--only NAME] [--workers N] [-o DIR] [--export-requests DIR]
    python scripts/distserve_check.py --write-lengths
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import simulator
from simulator.cli_support import integer_at_least, run_guarded

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
    Configuration(
        "vllm_1gpu_paged",
        "scenarios/distserve_check/colocated_opt13b_a100_paged_vllm_costs_1gpu.yaml",
        1,
    ),
    Configuration(
        "colocated_paged_1gpu",
        "scenarios/distserve_check/colocated_opt13b_a100_paged_1gpu.yaml",
        1,
    ),
)
"""The configurations compared: colocated (priced by DistServe's fit, and by its fit of vLLM)
and disaggregated (one prefill and one decode replica, DistServe's fit), each with KV reserved
whole (``scheduler.kv.on_full: queue``) and with KV that grows page by page (``_paged``:
``preempt_recompute``, as vLLM and DistServe hold it); and DistServe's own placement (prefill
at TP 2 and decode at TP 1, 3 GPUs) against three colocated GPUs, with paged KV; and vLLM as
the paper ran it (one GPU, DistServe's fit of vLLM, paged KV) beside one GPU priced by DistServe's
own fit."""

PAPER_COMPARISONS: tuple[tuple[str, str], ...] = (
    ("disaggregated_paged_tp2", "vllm_1gpu_paged"),
    ("disaggregated_paged", "vllm_1gpu_paged"),
)
"""Pairs (DistServe, vLLM) whose per-GPU rates at 90 % attainment are divided as the paper's
plotting script divides them (``_plot.py``: ``first_inter_x / inter_x``): DistServe's placement
and the 2-GPU pair, each against one vLLM GPU."""


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


def export_requests(requests_csv: Path, target: Path) -> int:
    """Write a run's requests as a custom workload of DistServe's simulator; return how many.

    ``target`` gets a JSON list, in arrival order, of ``{"start_time": arrival in
    seconds, "prompt_len": prompt tokens, "output_len": output tokens}``.
    """
    frame = pd.read_csv(requests_csv, usecols=["arrival_s", "prompt_tokens", "output_tokens"])
    frame = frame.sort_values("arrival_s", kind="stable")
    rows = [
        {"start_time": float(arrival), "prompt_len": int(prompt), "output_len": int(output)}
        for arrival, prompt, output in frame.itertuples(index=False)
    ]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(rows) + "\n")
    return len(rows)


def run_configuration(
    config: Configuration,
    rates_per_gpu: Sequence[float],
    requests: int,
    output_dir: Path,
    workers: int | None,
    seed: int | None = None,
    export_dir: Path | None = None,
) -> pd.DataFrame:
    """Attainment of ``config`` at every per-GPU rate (columns rate_per_gpu, attainment, ...).

    ``seed`` replaces the scenario's seed at every point when given; with ``export_dir``
    each point's requests are written there by :func:`export_requests`.
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
    if export_dir is not None:
        for rate, run_dir in zip(rates_per_gpu, table["run_dir"], strict=True):
            target = export_dir / config.name / f"rate_{rate:g}.json"
            export_requests(output_dir / config.name / str(run_dir) / "requests.csv", target)
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


def rates_option(text: str) -> list[float]:
    """``--rates``: comma-separated per-GPU rates, each a finite number > 0, increasing."""
    try:
        rates = [float(part) for part in text.split(",")]
    except ValueError:
        rates = []
    if not rates or not all(math.isfinite(r) and r > 0 for r in rates) or rates != sorted(rates):
        raise argparse.ArgumentTypeError(
            f"got {text!r}; allowed: comma-separated numbers > 0 in increasing order"
        )
    return rates


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rates",
        type=rates_option,
        default=list(PAPER_RATES_PER_GPU),
        help="per-GPU arrival rates, requests/s (default: the paper's)",
    )
    parser.add_argument(
        "--requests", type=integer_at_least(1), default=1000, help="requests per run"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of every run")
    parser.add_argument("--only", action="append", help="run only this configuration")
    parser.add_argument("--workers", type=int, default=None, help="sweep worker processes")
    parser.add_argument("-o", "--output", type=Path, default=None, help="results directory")
    parser.add_argument(
        "--export-requests",
        type=Path,
        default=None,
        help="also write each run's requests as DistServe's simulator's custom workload here",
    )
    parser.add_argument("--write-lengths", action="store_true", help="rewrite the lengths file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check and print its tables."""
    args = _parser().parse_args(argv)
    if args.write_lengths:
        rows = write_lengths()
        print(f"wrote {rows} rows to {LENGTHS_FILE.relative_to(ROOT)}")
        return 0
    rates: list[float] = args.rates
    configs = [c for c in SCENARIOS if not args.only or c.name in args.only]
    if not configs:
        names = ", ".join(c.name for c in SCENARIOS)
        print(
            f"error: --only: no configuration named {args.only}; allowed: {names}", file=sys.stderr
        )
        return 2
    crossings: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory() as scratch:
        output = args.output or Path(scratch)
        for config in configs:
            table = run_configuration(
                config, rates, args.requests, output, args.workers, args.seed, args.export_requests
            )
            print(f"## {config.name} ({config.gpus} GPUs, {config.scenario})")
            print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            crossing = rate_at(rates, table["attainment"].to_list(), TARGET_ATTAINMENT)
            crossings[config.name] = crossing
            text = "not crossed in the swept range" if crossing is None else f"{crossing:.3f}"
            print(f"per-GPU rate at {TARGET_ATTAINMENT:.0%} attainment: {text}\n")
    for line in paper_ratios(crossings):
        print(line)
    return 0


def paper_ratios(crossings: dict[str, float | None]) -> list[str]:
    """The paper's figure of merit for each pair of :data:`PAPER_COMPARISONS` that ran.

    DistServe's per-GPU rate at 90 % attainment over vLLM's (``_plot.py`` prints it as
    "Improvement"); a pair with a rate that did not cross in the swept range is said so.
    """
    lines = []
    for distserve, vllm in PAPER_COMPARISONS:
        if distserve not in crossings or vllm not in crossings:
            continue
        ours, theirs = crossings[distserve], crossings[vllm]
        if ours is None or theirs is None:
            lines.append(f"{distserve} over {vllm}: a rate did not cross {TARGET_ATTAINMENT:.0%}")
        else:
            lines.append(
                f"{distserve} over {vllm} (per-GPU rate at {TARGET_ATTAINMENT:.0%}): "
                f"{ours:.3f} / {theirs:.3f} = {ours / theirs:.2f}x"
            )
    return lines


if __name__ == "__main__":
    sys.exit(run_guarded(main))
