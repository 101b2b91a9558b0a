"""A chunked-prefill token budget below the prefill LUT's smallest context is refused.

A prompt's first chunk holds at least the smallest context of its prefill LUT
(128 in the shipped A100 Llama-2-7B file), so that no chunk is priced below the
grid. Before, a budget of 64 with a 300-token prompt was accepted, the prompt
never started (its first chunk never fitted the budget) and the run ended with
every request unfinished and ``requests.stalled_at_s`` in the summary, no reason
given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator import load_scenario, run
from simulator.errors import InputError
from tests.engine_fixtures import synthetic

REPO = Path(__file__).resolve().parent.parent


def _scenario(tmp_path: Path, budget: int) -> Path:
    document: dict[str, Any] = {
        "scenario_id": "chunk_budget",
        "workload": synthetic(1, 1.0, 300, 5, slo={"ttft_ms": 1000, "tpot_ms": 100}),
        "hardware_profiles": [
            {
                "id": "pool",
                "type": "target",
                "profile": str(REPO / "device_profiles/a100-tp1.yaml"),
            }
        ],
        "speculation": {
            "mode": "none",
            "verifier_models": [
                {"name": "llama-2-7b", "lut": str(REPO / "lut/llama-2-7b__a100-sxm4-80gb.csv")}
            ],
        },
        "scheduler": {
            "arbitration": {"policy": "chunked_prefill", "params": {"token_budget": budget}}
        },
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_a_budget_below_the_prefill_grid_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"token_budget.*got 64; allowed: >= 128"):
        load_scenario(_scenario(tmp_path, 64))


def test_a_budget_at_the_grid_prefills_a_longer_prompt_in_chunks(tmp_path: Path) -> None:
    result = run(load_scenario(_scenario(tmp_path, 128)))
    assert list(result.requests["outcome"]) == ["completed"]
    assert "stalled_at_s" not in result.summary["requests"]
