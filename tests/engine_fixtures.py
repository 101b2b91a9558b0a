"""Small, analytically simple scenarios for engine tests.

The LUTs written here are linear in context and batch size, so the LUT
manager's interpolation is exact and expected latencies can be computed by
hand. Device profiles are the shipped ones (real data); their numbers do not
enter these tests except through the LUTs written here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from simulator.scenario.sections.context import MODEL_LISTS, PHASES_BY_MODE

REPO = Path(__file__).resolve().parent.parent
PROFILES = REPO / "device_profiles"

CONTEXT_AXIS = (1, 131072)
BATCH_AXIS = (1, 4096)
K_AXIS = tuple(range(1, 9))
KV_MB_PER_TOKEN = 0.5
STATIC_MB = 1000.0
POWER_W = 100.0

LatencyFn = Callable[[float, float, int], float]


def write_lut(
    path: Path,
    model: str,
    hardware: str,
    phases: dict[str, LatencyFn],
    tp: int = 1,
    contexts: tuple[int, ...] = CONTEXT_AXIS,
    batches: tuple[int, ...] = BATCH_AXIS,
) -> Path:
    """Write a LUT whose latency for each phase is ``phases[phase](context, batch, k)`` ms."""
    rows: list[dict[str, Any]] = []
    for phase, latency in phases.items():
        ks = K_AXIS if phase in ("verify", "fused_decode") else (1,)
        for context in contexts:
            for batch in batches:
                for k in ks:
                    if phase == "prefill":
                        kv = context * batch * KV_MB_PER_TOKEN
                    elif phase == "draft_decode":
                        kv = batch * KV_MB_PER_TOKEN
                    else:
                        kv = batch * (k + 1) * KV_MB_PER_TOKEN
                    lat = latency(context, batch, k)
                    rows.append(
                        {
                            "phase": phase,
                            "model": model,
                            "hardware": hardware,
                            "tensor_parallel": tp,
                            "pipeline_parallel": 1,
                            "context_len": context,
                            "microbatch": batch,
                            "fanout_k": k,
                            "dtype": "fp16",
                            "latency_ms": lat,
                            "peak_mem_mb": STATIC_MB + kv,
                            "kv_delta_mb": kv,
                            "energy_mj": lat * POWER_W,
                            "source": "test_fixture",
                            "notes": "",
                        }
                    )
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def write_acceptance(path: Path, alpha: float) -> Path:
    """Write an i.i.d. acceptance curve with per-token probability ``alpha``."""
    path.write_text(
        yaml.safe_dump(
            {
                "method": "test",
                "kind": "iid",
                "topology": {"kind": "chain"},
                "bins": [{"alpha": alpha}],
                "source": "test fixture",
            }
        )
    )
    return path


def constant(ms: float) -> LatencyFn:
    """A latency that does not depend on context, batch or k."""
    return lambda context, batch, k: ms


def write_scenario(
    tmp_path: Path,
    *,
    mode: str,
    workload: dict[str, Any],
    target_phases: dict[str, LatencyFn] | None = None,
    draft_phases: dict[str, LatencyFn] | None = None,
    fused_phases: dict[str, LatencyFn] | None = None,
    alpha: float = 0.7,
    k: int = 4,
    replicas: int = 1,
    clients: int = 1,
    link: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    name: str = "scenario.yaml",
) -> Path:
    """Write a one-target-class scenario (plus a laptop client class) and its data files."""
    target_phases = target_phases or {
        "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
        "draft_decode": lambda c, b, _k: 20.0 + 0.001 * c * b,
        "verify": lambda c, b, k: 22.0 + 0.001 * c * b * (k + 1),
    }
    draft_phases = draft_phases or {
        "prefill": lambda c, b, _k: 5.0 + 0.01 * c * b,
        "draft_decode": lambda c, b, _k: 4.0,
    }
    fused_phases = fused_phases or {
        "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
        "fused_decode": lambda c, b, k: 22.0 + 2.0 * k + 0.001 * c * b * (k + 1),
    }
    write_lut(tmp_path / "target.csv", "target-model", "a100-sxm4-80gb", target_phases)
    write_lut(tmp_path / "draft.csv", "draft-model", "rtx-4050-laptop", draft_phases)
    write_lut(tmp_path / "fused.csv", "fused-model", "a100-sxm4-80gb", fused_phases)
    write_acceptance(tmp_path / "acc.yaml", alpha)
    document: dict[str, Any] = {
        "scenario_id": "test",
        "seed": 1,
        "workload": workload,
        "network": {
            "links": [link or {"src": "laptops", "dst": "pool", "rtt_ms": 0, "bw_mbps": 1e6}]
        },
        "hardware_profiles": [
            {
                "id": "laptops",
                "type": "draft",
                "profile": str(PROFILES / "rtx-4050-laptop.yaml"),
                "count": clients,
            },
            {
                "id": "pool",
                "type": "target",
                "profile": str(PROFILES / "a100-tp1.yaml"),
                "count": replicas,
                # The synthetic LUT rows are the steps the hand computations expect.
                "engine": "none",
            },
        ],
        "speculation": _speculation(mode, k),
        "scheduler": {
            "prefill": {"batching": {"max_batch": 1, "max_wait_ms": 0}},
            "verify": {"batching": {"max_batch": 64, "max_wait_ms": 0}},
        },
    }
    for dotted, value in (extra or {}).items():
        node = document
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _speculation(mode: str, k: int) -> dict[str, Any]:
    """The speculation section of ``mode``: only the model lists and keys the mode uses."""
    needed = PHASES_BY_MODE[mode]
    models = {
        "drafter_models": [{"name": "draft-model", "lut": "draft.csv"}],
        "verifier_models": [{"name": "target-model", "lut": "target.csv"}],
        "fused_models": [{"name": "fused-model", "lut": "fused.csv"}],
    }
    section: dict[str, Any] = {"mode": mode}
    if mode != "none":
        section["k"] = k
    section.update({key: value for key, value in models.items() if MODEL_LISTS[key] in needed})
    if mode != "none":
        section["acceptance_models"] = [{"name": "acc", "file": "acc.yaml"}]
    return section


def synthetic(
    num_requests: int,
    rate_per_s: float,
    prompt: int,
    output: int,
    *,
    slo: dict[str, Any] | None = None,
    process: str = "poisson",
) -> dict[str, Any]:
    """A synthetic workload section with fixed lengths."""
    return {
        "source": "synthetic",
        "synthetic": {
            "num_requests": num_requests,
            "arrival": {"process": process, "rate_per_s": rate_per_s},
            "prompt_tokens": {"dist": "fixed", "value": prompt},
            "output_tokens": {"dist": "fixed", "value": output},
        },
        "slo": slo or {"ttft_ms": 1000, "tpot_ms": 100, "tvt_ms": 200},
    }


def planner_every_second(candidates: dict[str, Any]) -> dict[str, Any]:
    """A ``planner`` section re-planning every simulated second over ``candidates``.

    One-second windows, models loading in a second, and windows every round
    (``replan_drift: 0``): the smallest planner a test can watch at work.
    """
    return {
        "enabled": True,
        "interval_s": 1,
        "window_s": 1,
        "model_load_s": 1.0,
        "replan_drift": 0,
        "candidates": candidates,
    }
