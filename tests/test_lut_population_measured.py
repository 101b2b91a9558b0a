"""LUTs against the H100 measurements, and the LUTs built from them (``lut/microbench/``)."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from lut_population.build import format_number
from lut_population.checks import check_measured, check_monotone_measured
from lut_population.measured import gpu_time_points, repeatability
from lut_population.measured_check import TOLERANCES, compare_dir, tier_of
from lut_population.microbench import FILLED_NOTE, SOURCE, microbench_plan
from simulator.lut import LutKey, LutManager, load_lut

ROOT = Path(__file__).resolve().parents[1]
LUT_DIR = ROOT / "lut"
MEASUREMENTS = ROOT / "lut_population" / "inputs" / "microbench_h100" / "iterations.csv"
HW = "h100-sxm5-80gb"
MODELS = ("llama-68m", "tinyllama-1.1b", "llama-3.2-1b", "llama-2-7b", "llama-3-8b")


def rows() -> list[dict[str, str]]:
    with MEASUREMENTS.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def scaled_copy(name: str, target: Path, factor: float) -> None:
    frame = pd.read_csv(LUT_DIR / name, keep_default_na=False)
    frame["latency_ms"] = frame["latency_ms"] * factor
    frame.to_csv(target / name, index=False)


@pytest.mark.slow
def test_the_shipped_h100_luts_pass_the_measurement_check():
    result = check_measured(LUT_DIR)
    assert result.ok, result.details
    comparisons = compare_dir(LUT_DIR)
    files = {c.file for c in comparisons}
    assert {f"{m}__{HW}.csv" for m in MODELS} <= files
    assert {f"microbench/{m}__{HW}.csv" for m in MODELS} <= files
    verify = next(
        c for c in comparisons if c.file == f"llama-3-8b__{HW}.csv" and c.phase == "verify"
    )
    assert verify.points == 32 and verify.skipped == 0
    # llama-68m's maximum context is 2048: its 4096-token points are outside the grid
    decode = next(
        c for c in comparisons if c.file == f"llama-68m__{HW}.csv" and c.phase == "draft_decode"
    )
    assert decode.skipped == 7


@pytest.mark.slow
@pytest.mark.parametrize("name", [f"llama-2-7b__{HW}.csv", f"llama-68m__{HW}.csv"])
def test_the_measurement_check_fails_on_a_lut_scaled_by_one_and_a_half(tmp_path, name):
    scaled_copy(name, tmp_path, 1.0)
    assert check_measured(tmp_path).ok
    scaled_copy(name, tmp_path, 1.5)
    result = check_measured(tmp_path)
    assert not result.ok
    assert any("FAIL" in line for line in result.details)


def test_tolerance_tiers_follow_the_source_tag():
    assert tier_of("vidur_profile@7d47513+compose_v2") == "profiled"
    assert tier_of("vidur_profile@7d47513+h100_ratio_v1+compose_v2") == "profiled"
    assert tier_of("vidur_op_roofline@7d47513+compose_v2") == "roofline"
    assert tier_of(SOURCE) == "measured"
    assert TOLERANCES["profiled"].median < TOLERANCES["roofline"].median
    with pytest.raises(ValueError, match="no measurement tolerance"):
        tier_of("roofline_v1")


def test_point_selection_prefers_packed_gqa_and_machine_a():
    verify = gpu_time_points("verify", "llama-3-8b")
    assert {m.mode for m in verify.values()} == {"graph-packgqa"}
    assert len(verify) == 32
    seven = gpu_time_points("verify", "llama-2-7b")
    assert {m.machine for m in seven.values()} == {"A"}
    assert len(seven) == 28
    assert 1.0 < repeatability() < 1.05  # machines A and B agree within 3.5 %


@pytest.mark.parametrize("model", MODELS)
def test_microbench_lut_reproduces_the_measured_medians(model):
    table = load_lut(LUT_DIR / "microbench" / f"{model}__{HW}.csv", use_cache=False)
    manager = LutManager([table])
    frame = pd.read_csv(LUT_DIR / "microbench" / f"{model}__{HW}.csv", keep_default_na=False)
    assert set(frame["source"]) == {SOURCE}
    compared = 0
    for row in rows():
        if row["model"] != model:
            continue
        packed = row["phase"] == "verify" and model == "llama-3-8b"
        if row["mode"] != ("graph-packgqa" if packed else "graph") or row["machine"] != (
            "B" if packed else "A"
        ):
            continue
        key = LutKey(row["phase"], model, HW, 1, 1, "fp16")
        grid = manager.grid(key)
        context = int(row["context_len"])
        if context > grid.context_len[-1]:
            continue  # beyond the model's maximum context
        point = (context, int(row["microbatch"]), int(row["fanout_k"]))
        assert point[0] in grid.context_len and point[1] in grid.microbatch
        got = manager.lookup(key, *point).latency_ms
        assert got == float(format_number(float(row["latency_ms_median"])))
        compared += 1
    assert compared >= 34


def test_unmeasured_points_are_filled_and_marked():
    frame = pd.read_csv(LUT_DIR / "microbench" / f"llama-2-7b__{HW}.csv", keep_default_na=False)
    filled = frame[frame["notes"].str.startswith(FILLED_NOTE)]
    verify = filled[filled["phase"] == "verify"]
    assert sorted(
        zip(verify["context_len"], verify["microbatch"], verify["fanout_k"], strict=True)
    ) == [
        (2048, 64, 1),
        (2048, 64, 2),
        (2048, 64, 4),
        (2048, 64, 8),
    ]
    measured = frame[frame["notes"].str.startswith("measured")]
    assert len(measured) + len(filled) == len(frame)
    assert len(measured) == 25 + 7 + 28


def test_fused_round_is_measured_draft_steps_plus_measured_verify():
    fused = LutManager([load_lut(LUT_DIR / "microbench" / f"llama-2-7b+llama-68m__{HW}.csv")])
    target = LutManager([load_lut(LUT_DIR / "microbench" / f"llama-2-7b__{HW}.csv")])
    draft = LutManager([load_lut(LUT_DIR / "microbench" / f"llama-68m__{HW}.csv")])
    round_key = LutKey("fused_decode", "llama-2-7b+llama-68m", HW, 1, 1, "fp16")
    verify_key = LutKey("verify", "llama-2-7b", HW, 1, 1, "fp16")
    decode_key = LutKey("draft_decode", "llama-68m", HW, 1, 1, "fp16")
    for k in (1, 2, 4, 8):
        expected = target.lookup(verify_key, 512, 16, k).latency_ms + sum(
            draft.lookup(decode_key, 512 + i, 16, 1).latency_ms for i in range(k)
        )
        assert fused.lookup(round_key, 512, 16, k).latency_ms == pytest.approx(expected, rel=2e-5)


def test_measured_files_are_listed_and_load():
    names = [f.name for f in microbench_plan()]
    assert f"microbench/llama-3-8b+llama-3.2-1b__{HW}.csv" in names
    catalog = (LUT_DIR / "CATALOG.md").read_text(encoding="utf-8")
    for name in names:
        load_lut(LUT_DIR / name)
        assert f"### {name}" in catalog
    assert "H100: composed LUTs against the measurements" in catalog


def test_measured_monotonicity_accepts_noise_and_refuses_a_real_drop():
    frame = pd.read_csv(LUT_DIR / "microbench" / f"llama-2-7b__{HW}.csv", keep_default_na=False)
    result = check_monotone_measured({"x.csv": frame})
    assert result.ok
    assert any(line.startswith("accepted") for line in result.details)
    broken = frame.copy()
    row = broken.index[(broken["phase"] == "verify") & (broken["fanout_k"] == 8)][0]
    broken.loc[row, "latency_ms"] *= 0.5
    assert not check_monotone_measured({"x.csv": broken}).ok
