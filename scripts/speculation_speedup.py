"""Simulated speed-up of speculative decoding over plain decoding against batch size.

Usage::

    python scripts/speculation_speedup.py [-o docs/figures/speculation_speedup.png] [--table]

One Llama-3-8B H100 replica (TP 1) serves B closed-loop users with no think time
(B = 1, 2, 4, ..., 64; 512-token prompts, 256 output tokens, four waves of B
requests), so about B sequences decode together. Each drafter runs fused on the
replica, under two engine profiles (``device_profiles/engines/``): the
CUDA-graph engine (host time once per step) and the older engine Vidur
profiled (host time per forward pass). The speed-up at B is the output tokens
per second of the speculative run over those of plain decoding at the same B
under the same engine profile.

Drafters and the acceptance curves they draw from (``acceptance/``):

* a separate draft model, Llama-3.2-1B, k = 4, with Spec-Bench's SpS curve on
  Vicuna-7B as a stated stand-in (no curve of that pair is measured);
* the EAGLE-3 head of Llama-3-8B (the shapes of Llama-3.1-8B) drafting a chain
  of k = 7, with the curve measured on vLLM's chain;
* the same head drafting SGLang's default token tree (``speculation.tree``:
  depth 5, width 4, 8 nodes), with the curve measured on SGLang, whose tree
  shape the source does not state (SGLang's documented defaults are assumed);
* that SGLang curve priced as a chain of 5 (``acceptance_conversion:
  tree_as_chain``), as a tree-measured curve was run before trees were priced
  and before curves stated their topology (the tree's extra drafting and
  verifying is the difference; the chain's acceptance is overstated).

Prints the table (``--table``: as Markdown only, for ``docs/speculation.md``)
and writes the figure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from simulator import load_scenario, run  # noqa: E402

BATCHES = (1, 2, 4, 8, 16, 32, 64)
ENGINES = ("cuda-graph", "vidur-vllm-v0")
HARDWARE = "h100-sxm5-80gb"
TARGET = "llama-3-8b"
HEAD = f"{TARGET}.eagle3"
PROMPT_TOKENS = 512
OUTPUT_TOKENS = 256
WAVES = 4
DEFAULT_FIGURE = ROOT / "docs" / "figures" / "speculation_speedup.png"
T = TypeVar("T")


def lut(model: str) -> str:
    """The shipped H100 LUT of ``model``."""
    return f"builtin:lut/{model}__{HARDWARE}.csv"


SGLANG_TREE: dict[str, Any] = {
    "depth": 5,
    "width": 4,
    "nodes": 8,
    "drafter": {"lut": lut(HEAD)},
    "verifier": {"lut": lut(TARGET)},
}
"""SGLang's documented defaults: speculative_num_steps 5, speculative_eagle_topk 4,
speculative_num_draft_tokens 8 (docs.sglang.io, "Speculative Decoding")."""


@dataclass(frozen=True)
class Drafter:
    """One way of drafting: the fused model, its acceptance curve, k and token tree (``None``: chain).

    ``temperature``, ``category`` (every request's task category) and ``conversion``
    (``speculation.acceptance_conversion``) say how the curve is read.
    """

    label: str
    fused_model: str
    acceptance: str
    k: int
    tree: dict[str, Any] | None = None
    temperature: float = 0.0
    category: str = ""
    conversion: str = "none"


DRAFTERS = (
    Drafter(
        "separate draft model (Llama-3.2-1B, k = 4)", f"{TARGET}+llama-3.2-1b", "sps_vicuna-7b", 4
    ),
    Drafter("EAGLE-3 chain (k = 7)", f"{TARGET}+{HEAD}", "eagle3_llama-3.1-8b_vllm-chain", 7),
    Drafter(
        "EAGLE-3 tree (depth 5, width 4, 8 nodes)",
        f"{TARGET}+{HEAD}",
        "eagle3_llama-3.1-8b",
        5,
        SGLANG_TREE,
    ),
    Drafter(
        "EAGLE-3 tree curve run as a chain (k = 5)",
        f"{TARGET}+{HEAD}",
        "eagle3_llama-3.1-8b",
        5,
        conversion="tree_as_chain",
    ),
)


def scenario(batch: int, engine: str, drafter: Drafter | None) -> dict[str, Any]:
    """The scenario document of one point (plain decoding when ``drafter`` is None)."""
    speculation: dict[str, Any]
    if drafter is None:
        speculation = {
            "mode": "none",
            "verifier_models": [{"name": TARGET, "lut": lut(TARGET)}],
        }
    else:
        speculation = {
            "mode": "fused",
            "k": drafter.k,
            "fused_models": [{"name": drafter.fused_model, "lut": lut(drafter.fused_model)}],
            "acceptance_models": [
                {"name": "curve", "file": f"builtin:acceptance/{drafter.acceptance}.yaml"}
            ],
        }
        if drafter.tree is not None:
            speculation["tree"] = drafter.tree
        if drafter.temperature:
            speculation["temperature"] = drafter.temperature
        if drafter.conversion != "none":
            speculation["acceptance_conversion"] = drafter.conversion
    synthetic: dict[str, Any] = {
        "num_requests": WAVES * batch,
        "prompt_tokens": {"dist": "fixed", "value": PROMPT_TOKENS},
        "output_tokens": {"dist": "fixed", "value": OUTPUT_TOKENS},
    }
    if drafter is not None and drafter.category:
        synthetic["category_mix"] = {drafter.category: 1}
    return {
        "scenario_id": "speculation_speedup",
        "seed": 1,
        "workload": {
            "source": "synthetic",
            "synthetic": synthetic,
            "closed_loop": {"users": batch, "think_time_s": 0},
            "slo": {"ttft_ms": 1000, "tpot_ms": 100},
        },
        "hardware_profiles": [
            {
                "id": "h100",
                "type": "target",
                "profile": "builtin:device_profiles/h100-tp1.yaml",
                "count": 1,
                "engine": engine,
            }
        ],
        "speculation": speculation,
        "scheduler": {
            "prefill": {"batching": {"max_batch": batch, "max_tokens": batch * PROMPT_TOKENS}},
            "verify": {"batching": {"max_batch": batch}},
        },
    }


def throughput(document: dict[str, Any], folder: Path) -> float:
    """Output tokens per second of one run."""
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    summary = run(load_scenario(path)).summary
    return float(summary["throughput"]["output_tokens_per_s"])


def speedups() -> dict[tuple[str, str], list[float]]:
    """Speed-up over plain decoding per (engine, drafter label), one value per batch size."""
    out: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for engine in ENGINES:
            plain = [throughput(scenario(b, engine, None), folder) for b in BATCHES]
            for drafter in DRAFTERS:
                fused = [throughput(scenario(b, engine, drafter), folder) for b in BATCHES]
                out[(engine, drafter.label)] = [f / p for f, p in zip(fused, plain, strict=True)]
    return out


def table(results: dict[tuple[str, str], list[float]]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| engine profile | drafter | " + " | ".join(f"B = {b}" for b in BATCHES) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in BATCHES) + " |",
    ]
    for (engine, label), values in results.items():
        cells = " | ".join(f"{v:.2f}" for v in values)
        lines.append(f"| `{engine}` | {label} | {cells} |")
    return "\n".join(lines)


def figure(results: dict[tuple[str, str], list[float]], path: Path) -> None:
    """Speed-up against batch size, one line per engine profile and drafter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10.5, 4.8))
    styles = {"cuda-graph": "-", "vidur-vllm-v0": "--"}
    markers = ["o", "s", "^", "D"]  # one per drafter
    for (engine, label), values in results.items():
        index = [d.label for d in DRAFTERS].index(label)
        ax.plot(
            BATCHES,
            values,
            linestyle=styles[engine],
            marker=markers[index],
            color=f"C{index}",
            label=f"{label}, {engine}",
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(BATCHES, [str(b) for b in BATCHES])
    ax.set_xlabel("concurrent sequences (closed-loop users)")
    ax.set_ylabel("speed-up over plain decoding")
    ax.set_title("Llama-3-8B on one H100: simulated speed-up of fused speculation")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    save(fig, path)


def save(fig: Any, path: Path) -> None:
    """Write a figure (PNG, no software stamp, so reruns give the same bytes) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, metadata={"Software": None})
    plt.close(fig)


def figure_main(
    argv: list[str] | None,
    description: str,
    default: Path,
    compute: Callable[[], T],
    render_table: Callable[[T], str],
    draw: Callable[[T, Path], None],
) -> int:
    """The command line of a figure script: compute, print the table, draw unless ``--table``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("-o", type=Path, default=default, help="figure file (PNG)")
    parser.add_argument("--table", action="store_true", help="print the table as Markdown only")
    args = parser.parse_args(argv)
    if not args.table and args.o.is_dir():
        parser.error(f"-o {args.o}: a folder; allowed: a PNG file path")
    found = compute()
    print(render_table(found))
    if not args.table:
        try:
            draw(found, args.o)
        except OSError as exc:
            print(
                f"error: -o {args.o}: not written ({exc.strerror}); allowed: a writable PNG file path",
                file=sys.stderr,
            )
            return 2
        print(f"wrote {args.o}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the points, print the table and write the figure."""
    return figure_main(argv, __doc__.splitlines()[0], DEFAULT_FIGURE, speedups, table, figure)


if __name__ == "__main__":
    raise SystemExit(main())
