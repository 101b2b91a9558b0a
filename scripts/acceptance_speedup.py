"""Tokens per verify and speed-up against batch size as acceptance changes with what it depends on.

Usage::

    python scripts/acceptance_speedup.py [-o docs/figures/acceptance_speedup.png] [--table]

The setting of ``scripts/speculation_speedup.py``: one Llama-3-8B H100 replica
(TP 1, the CUDA-graph engine profile) serves B closed-loop users with no think
time (512-token prompts, 256 output tokens, four waves of B requests), fused
speculation against plain decoding at the same B. The cost of a round is the
same within each group below; only the acceptance curve, or how it is read,
changes:

* **chain vs tree**: the EAGLE-3 head drafting a chain of 5 (the curve measured
  on vLLM's chain) and SGLang's default tree (the curve measured on SGLang);
  and the SGLang curve run as a chain of 5 under ``acceptance_conversion:
  tree_as_chain``, the overstatement the conversion rule names;
* **two temperatures**: the EAGLE-1 curves of Qwen2-7B-Instruct (chain, k = 4),
  measured at temperature 0 and 1, drafted at the price of the Llama-3-8B
  EAGLE-3 head (a stated stand-in: no Qwen2-7B LUT is shipped);
* **three task categories**: Spec-Bench's SpS curve on Vicuna-7B for
  ``multi_turn``, ``math`` and ``translation`` (its per-category bins),
  drafted by Llama-3.2-1B at k = 4 (the stand-in of the cost script).

Prints the table (``--table``: as Markdown only, for ``docs/speculation.md``)
and writes the figure.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.speculation_speedup import (  # noqa: E402
    BATCHES,
    HEAD,
    SGLANG_TREE,
    TARGET,
    Drafter,
    figure_main,
    save,
    scenario,
)
from simulator import load_scenario, run  # noqa: E402

ENGINE = "cuda-graph"
DEFAULT_FIGURE = ROOT / "docs" / "figures" / "acceptance_speedup.png"
EAGLE = f"{TARGET}+{HEAD}"
SPS = f"{TARGET}+llama-3.2-1b"

GROUPS: dict[str, tuple[Drafter, ...]] = {
    "chain vs tree (EAGLE-3, Llama-3.1-8B curves)": (
        Drafter("chain, k = 5 (vLLM chain curve)", EAGLE, "eagle3_llama-3.1-8b_vllm-chain", 5),
        Drafter(
            "tree, depth 5, width 4, 8 nodes (SGLang tree curve)",
            EAGLE,
            "eagle3_llama-3.1-8b",
            5,
            SGLANG_TREE,
        ),
        Drafter(
            "tree curve run as a chain of 5 (tree_as_chain)",
            EAGLE,
            "eagle3_llama-3.1-8b",
            5,
            conversion="tree_as_chain",
        ),
    ),
    "temperature (EAGLE-1 chain curve, Qwen2-7B)": (
        Drafter("temperature 0", EAGLE, "eagle_qwen2-7b_chain", 4),
        Drafter("temperature 1", EAGLE, "eagle_qwen2-7b_chain", 4, temperature=1.0),
    ),
    "task category (SpS curve, Vicuna-7B)": (
        Drafter("multi_turn", SPS, "sps_vicuna-7b", 4, category="multi_turn"),
        Drafter("math", SPS, "sps_vicuna-7b", 4, category="math"),
        Drafter("translation", SPS, "sps_vicuna-7b", 4, category="translation"),
    ),
}

Point = tuple[float, float | None]
"""(output tokens per second, mean tokens per verify) of one run."""


def measure(drafter: Drafter | None, batch: int, folder: Path) -> Point:
    """Throughput and tokens per verify of one run."""
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario(batch, ENGINE, drafter)), encoding="utf-8")
    summary = run(load_scenario(path)).summary
    tokens = summary["speculation"]["mean_tokens_per_verify"]
    return float(summary["throughput"]["output_tokens_per_s"]), tokens


Results = dict[tuple[str, str], tuple[list[float], list[float]]]
"""(group, label) -> (tokens per verify, speed-up) per batch size."""


def results() -> Results:
    """Every drafter's tokens per verify and speed-up over plain decoding, per batch size."""
    out: Results = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain = [measure(None, b, folder)[0] for b in BATCHES]
        for group, drafters in GROUPS.items():
            for drafter in drafters:
                points = [measure(drafter, b, folder) for b in BATCHES]
                tokens = [float(t) if t is not None else float("nan") for _, t in points]
                speedup = [p / base for (p, _), base in zip(points, plain, strict=True)]
                out[(group, drafter.label)] = (tokens, speedup)
    return out


def table(found: Results) -> str:
    """The results as a Markdown table (tokens per verify / speed-up at each B)."""
    lines = [
        "| group | curve, as read | " + " | ".join(f"B = {b}" for b in BATCHES) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in BATCHES) + " |",
    ]
    for (group, label), (tokens, speedup) in found.items():
        cells = " | ".join(f"{t:.2f} / {s:.2f}" for t, s in zip(tokens, speedup, strict=True))
        lines.append(f"| {group} | {label} | {cells} |")
    return "\n".join(lines)


def figure(found: Results, path: Path) -> None:
    """Two panels per group: tokens per verify and speed-up against batch size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(GROUPS)
    fig, axes = plt.subplots(2, len(groups), figsize=(13.5, 6.6), sharex=True)
    for column, group in enumerate(groups):
        top, bottom = axes[0][column], axes[1][column]
        for index, drafter in enumerate(GROUPS[group]):
            tokens, speedup = found[(group, drafter.label)]
            style = {"color": f"C{index}", "marker": "osD^"[index], "label": drafter.label}
            top.plot(BATCHES, tokens, **style)
            bottom.plot(BATCHES, speedup, **style)
        bottom.axhline(1.0, color="black", linewidth=0.8)
        top.set_title(group, fontsize=9)
        top.legend(fontsize=7, frameon=False)
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xticks(BATCHES, [str(b) for b in BATCHES])
        bottom.set_xlabel("concurrent sequences")
    axes[0][0].set_ylabel("tokens per verify")
    axes[1][0].set_ylabel("speed-up over plain decoding")
    fig.suptitle(
        "Llama-3-8B on one H100 (CUDA-graph engine): acceptance by shape, temperature, task"
    )
    save(fig, path)


def main(argv: list[str] | None = None) -> int:
    """Run the points, print the table and write the figure."""
    return figure_main(argv, __doc__.splitlines()[0], DEFAULT_FIGURE, results, table, figure)


if __name__ == "__main__":
    raise SystemExit(main())
