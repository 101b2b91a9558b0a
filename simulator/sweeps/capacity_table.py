"""The files of ``simulate capacity -o DIR``: one row per probe, and the result.

``probes.csv`` holds every run of the search in the order run;
``capacity.json`` the highest passing rate and the verdict line. Both are
written as one results directory (:func:`simulator.outputs.write_files`),
with the rules of ``simulate run -o DIR``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.outputs import FLOAT_FORMAT, check_output_dir, write_files
from simulator.sweeps.search import CapacityResult, Probe

PROBES_FILE = "probes.csv"
RESULT_FILE = "capacity.json"
ENTRIES = frozenset({PROBES_FILE, RESULT_FILE})
"""What a capacity results directory may hold."""

PROBE_COLUMNS = (
    "probe",
    "arrival_scale",
    "offered_requests_per_s",
    "offered_requests_per_gpu_s",
    "measured_requests",
    "completed",
    "rejected",
    "unfinished",
    "rejected_by_reason",
    "slo_attainment",
    "ttft_pass_rate",
    "tpot_pass_rate",
    "tvt_pass_rate",
    "passed",
    "goodput_requests_per_s",
    "goodput_requests_per_gpu_s",
)


def check_capacity_dir(out_dir: Path) -> None:
    """Refuse ``-o DIR`` before the search when results cannot be written there."""
    check_output_dir(out_dir, "command line", "-o/--output", ENTRIES)


def _row(number: int, probe: Probe, gpus: int) -> dict[str, Any]:
    rates = dict(probe.slo_pass_rate)
    rejected = dict(probe.rejected_by_reason)
    return {
        "probe": number,
        "arrival_scale": probe.arrival_scale,
        "offered_requests_per_s": probe.offered_requests_per_s,
        "offered_requests_per_gpu_s": probe.offered_requests_per_s / gpus if gpus else None,
        "measured_requests": probe.measured_requests,
        "completed": probe.completed,
        "rejected": sum(rejected.values()),
        "unfinished": probe.unfinished,
        "rejected_by_reason": json.dumps(rejected, sort_keys=True),
        "slo_attainment": probe.slo_attainment,
        "ttft_pass_rate": rates.get("ttft"),
        "tpot_pass_rate": rates.get("tpot"),
        "tvt_pass_rate": rates.get("tvt"),
        "passed": probe.passed,
        "goodput_requests_per_s": probe.goodput_requests_per_s,
        "goodput_requests_per_gpu_s": probe.goodput_requests_per_gpu_s,
    }


def probes_frame(result: CapacityResult) -> pd.DataFrame:
    """One row per probe, in the order run (``probe`` counts from 1)."""
    records = [_row(i, probe, result.gpus) for i, probe in enumerate(result.probes, start=1)]
    frame: pd.DataFrame = pd.DataFrame.from_records(records, columns=list(PROBE_COLUMNS))
    return frame


def write_capacity(result: CapacityResult, out_dir: Path) -> list[Path]:
    """Write ``probes.csv`` and ``capacity.json`` as the directory ``out_dir``, whole."""
    best = result.best
    document = {
        "slo_attainment_target": result.target,
        "gpus": result.gpus,
        "max_arrival_scale": best.arrival_scale if best else None,
        "max_requests_per_s": result.requests_per_s,
        "max_requests_per_gpu_s": result.requests_per_gpu_s,
        "capped": result.capped,
        "probes": len(result.probes),
        "verdict": result.describe(),
    }
    texts = {
        PROBES_FILE: probes_frame(result).to_csv(
            index=False, float_format=FLOAT_FORMAT, lineterminator="\n"
        ),
        RESULT_FILE: json.dumps(document, indent=2, allow_nan=False) + "\n",
    }
    return write_files(out_dir, texts, ENTRIES)
