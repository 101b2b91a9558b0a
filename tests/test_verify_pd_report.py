"""The Verify-PD claims: verdicts follow the figures, and missing sweeps are said to be missing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent


report = load_script(ROOT / "scripts" / "verify_pd_report.py", "verify_pd_report")


def _grid(tmp_path: Path, completed: dict[str, tuple[int, float, float]]) -> Path:
    """A main grid of one pair with pd and pdv_unified at C = 84, open loop.

    ``completed``: per architecture, (completed requests, completed-only and all throughput).
    """
    rows = []
    for arch, (done, tok_completed, tok_all) in completed.items():
        for accounting, tok in (("completed", tok_completed), ("all", tok_all)):
            rows.append(
                {
                    "architecture": arch,
                    "concurrency": 84,
                    "host_overhead": 0,
                    "loop": "open",
                    "accounting": accounting,
                    "arrived": 140,
                    "completed": done,
                    "throughput_tok_s": tok,
                    "engine": "eager-pytorch",
                }
            )
    folder = tmp_path / "llama2_7b_tinyllama_a100_eager-pytorch"
    folder.mkdir()
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    return tmp_path


@pytest.mark.parametrize(
    ("figures", "verdict"),
    [
        # The documents' multiple only when unfinished requests are left out.
        ({"pd": (4, 1.0, 40.0), "pdv_unified": (75, 30.0, 42.0)}, "only under completed"),
        ({"pd": (4, 1.0, 1.0), "pdv_unified": (75, 30.0, 30.0)}, "reproduced"),
        ({"pd": (107, 35.7, 43.0), "pdv_unified": (127, 42.4, 43.6)}, "not reproduced"),
    ],
)
def test_a_headline_multiple_is_judged_by_both_accountings(tmp_path, figures, verdict) -> None:
    results = report.Results(_grid(tmp_path, figures))
    claim = report._multiple(results, "llama2_7b_tinyllama_a100", 84, 29.6, "Llama-2-7B")
    assert claim.verdict.startswith(verdict)
    assert f"{figures['pd'][0]} against {figures['pdv_unified'][0]} requests" in claim.figure


def test_a_pair_that_did_not_run_is_not_testable(tmp_path) -> None:
    results = report.Results(_grid(tmp_path, {"pd": (4, 1.0, 1.0), "pdv_unified": (4, 1.0, 1.0)}))
    claim = report._multiple(results, "tinyllama_tinyllama_a100", 128, 33.7, "TinyLlama")
    assert claim.verdict == "not testable"


def test_an_empty_folder_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"no results\.csv"):
        report.Results(tmp_path)
    assert report.main([str(tmp_path)]) == 2
