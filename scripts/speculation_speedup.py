"""Speed-up of fused speculation over plain decoding on one Llama-3-8B H100, by batch.

Closed-loop users (B = 1 .. 64, no think time, 512-token prompts, 256 output
tokens, four requests per user) keep a batch of B sequences decoding on one
H100 (TP 1). Each drafter runs in mode ``fused`` under the ``cuda-graph`` and
``vidur-vllm-v0`` engine profiles; the speed-up is the plain run's mean TPOT
over the drafter's (same B, same engine). Usage::

    python scripts/speculation_speedup.py [--users 1 2 4 8 16 32 64]

Drafters (:data:`DRAFTERS`): the EAGLE-3 head of Llama-3-8B drafting a chain
of 7 with the curve measured on vLLM's chain, the same head drafting SGLang's
default tree (depth 5, width 4, 8 nodes: ``speculation.tree``) with the curve
measured on SGLang (whose tree shape the source does not state; SGLang's
documented defaults are assumed), and that SGLang curve priced as a chain of 5
(how a tree-measured curve was run before trees were priced).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator import load_scenario, run  # noqa: E402

H100 = "h100-sxm5-80gb"
TARGET_LUT = f"builtin:lut/llama-3-8b__{H100}.csv"
HEAD_LUT = f"builtin:lut/llama-3-8b.eagle3__{H100}.csv"
FUSED_LUT = f"builtin:lut/llama-3-8b+llama-3-8b.eagle3__{H100}.csv"
ENGINES = ("cuda-graph", "vidur-vllm-v0")
USERS = (1, 2, 4, 8, 16, 32, 64)

SGLANG_TREE = {
    "depth": 5,
    "width": 4,
    "nodes": 8,
    "drafter": {"lut": HEAD_LUT},
    "verifier": {"lut": TARGET_LUT},
}
"""SGLang's documented defaults: speculative_num_steps 5, speculative_eagle_topk 4,
speculative_num_draft_tokens 8 (docs.sglang.io, "Speculative Decoding")."""


@dataclass(frozen=True)
class Drafter:
    """One fused drafter: its label, acceptance curve, k and token tree (``None``: chain)."""

    label: str
    curve: str
    k: int
    tree: dict[str, Any] | None = None


DRAFTERS = (
    Drafter("EAGLE-3 chain k=7 (vLLM chain curve)", "eagle3_llama-3.1-8b_vllm-chain", 7),
    Drafter("EAGLE-3 SGLang curve as a chain k=5", "eagle3_llama-3.1-8b", 5),
    Drafter(
        "EAGLE-3 tree (depth 5, width 4, 8 nodes; SGLang defaults)",
        "eagle3_llama-3.1-8b",
        5,
        SGLANG_TREE,
    ),
)


def scenario(users: int, engine: str, drafter: Drafter | None) -> dict[str, Any]:
    """The scenario document of one run (``drafter`` ``None``: plain decoding)."""
    doc: dict[str, Any] = {
        "scenario_id": "speedup",
        "seed": 1,
        "workload": {
            "source": "synthetic",
            "synthetic": {
                "num_requests": 4 * users,
                "prompt_tokens": {"dist": "fixed", "value": 512},
                "output_tokens": {"dist": "fixed", "value": 256},
            },
            "closed_loop": {"users": users, "think_time_s": 0},
            "slo": {"ttft_ms": 10000, "tpot_ms": 1000},
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
        "scheduler": {
            "prefill": {"batching": {"max_batch": users, "max_tokens": 512 * users}},
            "verify": {"batching": {"max_batch": users}},
        },
    }
    if drafter is None:
        doc["speculation"] = {
            "mode": "none",
            "verifier_models": [{"name": "llama-3-8b", "lut": TARGET_LUT}],
        }
        return doc
    doc["speculation"] = {
        "mode": "fused",
        "k": drafter.k,
        "fused_models": [
            {
                "name": "eagle3",
                "model": "llama-3-8b+llama-3-8b.eagle3",
                "lut": FUSED_LUT,
                "acceptance": "curve",
            }
        ],
        "acceptance_models": [
            {"name": "curve", "file": f"builtin:acceptance/{drafter.curve}.yaml"}
        ],
    }
    if drafter.tree is not None:
        doc["speculation"]["tree"] = drafter.tree
    return doc


def mean_tpot_ms(doc: dict[str, Any], folder: Path) -> float:
    """Mean TPOT of one run."""
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    summary = json.loads(json.dumps(run(load_scenario(path)).summary))
    return float(summary["latency_ms"]["tpot"]["mean"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=list(USERS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for engine in ENGINES:
            print(f"engine {engine}: speed-up over plain decoding (mean TPOT ratio)")
            print("| drafter | " + " | ".join(f"B={b}" for b in args.users) + " |")
            print("| --- |" + " --- |" * len(args.users))
            plain = [mean_tpot_ms(scenario(b, engine, None), folder) for b in args.users]
            print("| plain decoding TPOT (ms) | " + " | ".join(f"{t:.2f}" for t in plain) + " |")
            for drafter in DRAFTERS:
                cells = [
                    plain[i] / mean_tpot_ms(scenario(b, engine, drafter), folder)
                    for i, b in enumerate(args.users)
                ]
                print(f"| {drafter.label} | " + " | ".join(f"{c:.2f}x" for c in cells) + " |")
            print()


if __name__ == "__main__":
    main()
