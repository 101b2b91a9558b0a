"""The committed LUT files: format, loadability, checks, determinism, catalog."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lut_population.build import COLUMNS, build_tables, format_number
from lut_population.checks import _frames, check_kv, check_loadable, check_monotone
from lut_population.plan import build_plan
from lut_population.spot_checks import SPOT_TOLERANCE, spot_checks
from lut_population.v2_checks import tpot_check
from simulator.lut import LutKey, LutManager, load_lut

LUT_DIR = Path(__file__).resolve().parents[1] / "lut"


@pytest.fixture(scope="module")
def plan():
    return build_plan()


@pytest.fixture(scope="module")
def names(plan):
    return [f.name for f in plan]


def test_every_planned_file_is_committed_and_small(names):
    sizes = [(LUT_DIR / n).stat().st_size for n in names]
    # About 33.4 MiB of target, draft and fused tables (128k-window grids; CodeLlama-34B at TP 1
    # and its pair with TinyLlama-1.1B, TinyLlama-1.1B's verify rows and its pair with itself add
    # 1.7 MiB) plus about 17.7 MiB of draft-head tables (head steps with their tree-level rows,
    # and fused head rounds).
    assert sum(sizes) < 52 * 2**20
    assert {"llama-2-70b__a100-sxm4-80gb.csv", "llama-3-8b__h100-sxm5-80gb.csv"} <= set(names)
    for draft in ("tinyllama-1.1b", "llama-68m", "llama-3.2-1b"):
        for hw in ("iphone-16-pro", "rtx-4050-laptop", "macbook-m3-max", "jetson-orin-nano-super"):
            assert f"{draft}__{hw}.csv" in names
    assert "llama-2-70b+tinyllama-1.1b__h100-sxm5-80gb.csv" in names
    assert "llama-3-8b+llama-3-8b.eagle3__h100-sxm5-80gb.csv" in names
    for hw in ("a100-sxm4-80gb", "h100-sxm5-80gb"):
        for model in (
            "codellama-34b",
            "codellama-34b+tinyllama-1.1b",
            "tinyllama-1.1b+tinyllama-1.1b",
        ):
            assert f"{model}__{hw}.csv" in names


@pytest.mark.parametrize("hw", ["a100-sxm4-80gb", "h100-sxm5-80gb"])
def test_tinyllama_verifies_on_datacenter_gpus_only(hw):
    frame = pd.read_csv(LUT_DIR / f"tinyllama-1.1b__{hw}.csv", keep_default_na=False)
    assert set(frame["phase"]) == {"prefill", "draft_decode", "verify"}
    verify = frame[frame["phase"] == "verify"]
    assert set(verify["tensor_parallel"]) == {1}
    assert set(verify["fanout_k"]) == set(range(1, 9))
    assert verify["context_len"].max() == 2048
    devices = pd.read_csv(LUT_DIR / "tinyllama-1.1b__iphone-16-pro.csv", keep_default_na=False)
    assert set(devices["phase"]) == {"prefill", "draft_decode"}
    fused = pd.read_csv(LUT_DIR / f"tinyllama-1.1b+tinyllama-1.1b__{hw}.csv", keep_default_na=False)
    assert set(fused["phase"]) == {"prefill", "fused_decode"}
    # The draft is a second copy of the model: a round is k decode steps plus verify(k).
    manager = LutManager([load_lut(LUT_DIR / f"tinyllama-1.1b__{hw}.csv")])
    decode = manager.lookup(LutKey("draft_decode", "tinyllama-1.1b", hw, 1, 1, "fp16"), 512, 8, 1)
    check = manager.lookup(LutKey("verify", "tinyllama-1.1b", hw, 1, 1, "fp16"), 512, 8, 1)
    row = fused[
        (fused["phase"] == "fused_decode")
        & (fused["context_len"] == 512)
        & (fused["microbatch"] == 8)
        & (fused["fanout_k"] == 1)
    ]
    assert row["latency_ms"].item() == pytest.approx(decode.latency_ms + check.latency_ms, rel=1e-4)


@pytest.mark.parametrize("hw", ["a100-sxm4-80gb", "h100-sxm5-80gb"])
def test_codellama_34b_fits_one_gpu_with_kv_room(hw):
    frame = pd.read_csv(LUT_DIR / f"codellama-34b__{hw}.csv", keep_default_na=False)
    assert set(frame["tensor_parallel"]) == {1}
    assert set(frame["phase"]) == {"prefill", "draft_decode", "verify"}
    assert frame["context_len"].max() == 16384
    assert set(frame.loc[frame["phase"] == "verify", "fanout_k"]) == set(range(1, 9))
    decode = frame[frame["phase"] == "draft_decode"]
    # fp16 weights of 33.7 B parameters: 64 360 MiB of the GPU's 81 920.
    one = decode[(decode["microbatch"] == 1) & (decode["context_len"] == 128)]
    assert 64_000 < one["peak_mem_mb"].item() < 65_000
    assert one["notes"].item() == ""
    # 16 sequences of 4096 tokens (12 GiB of KV) fit; 64 sequences of 16384 do not.
    fits = decode[(decode["microbatch"] == 16) & (decode["context_len"] == 4096)]
    assert fits["notes"].item() == ""
    assert fits["peak_mem_mb"].item() < 80 * 1024
    over = decode[(decode["microbatch"] == 64) & (decode["context_len"] == 16384)]
    assert over["notes"].item().startswith("exceeds memory")
    assert frame["source"].str.startswith("vidur_op_roofline@").all()
    fused = pd.read_csv(LUT_DIR / f"codellama-34b+tinyllama-1.1b__{hw}.csv", keep_default_na=False)
    assert fused["context_len"].max() == 2048  # TinyLlama-1.1B's window


@pytest.mark.slow
def test_files_load_and_pass_the_shape_and_monotonicity_checks(names):
    assert check_loadable(LUT_DIR, names).ok
    frames = _frames(LUT_DIR, names)
    assert check_monotone(frames).ok
    assert check_kv(frames).ok


def test_monotonicity_check_catches_a_violation(names):
    frame = pd.read_csv(LUT_DIR / "llama-68m__a100-sxm4-80gb.csv", keep_default_na=False)
    broken = frame.copy()
    row = broken.index[(broken["phase"] == "draft_decode") & (broken["microbatch"] == 2)][0]
    broken.loc[row, "latency_ms"] = 0.001
    assert not check_monotone({"x.csv": broken}).ok
    broken_kv = frame.copy()
    broken_kv.loc[0, "kv_delta_mb"] *= 2
    assert not check_kv({"x.csv": broken_kv}).ok


def test_build_is_deterministic_and_matches_the_committed_files(plan):
    small = tuple(f for f in plan if f.name.startswith(("llama-68m__", "tinyllama-1.1b__iphone")))
    first = build_tables(small)
    second = build_tables(small)
    for a, b in zip(first, second, strict=True):
        assert a.text == b.text
        assert (LUT_DIR / a.spec.name).read_text(encoding="utf-8") == a.text


def test_rows_have_the_contract_columns_and_sources():
    frame = pd.read_csv(
        LUT_DIR / "llama-2-70b+llama-68m__a100-sxm4-80gb.csv", keep_default_na=False
    )
    assert tuple(frame.columns) == COLUMNS
    assert set(frame["phase"]) == {"prefill", "fused_decode"}
    assert set(frame["pipeline_parallel"]) == {1}
    assert set(frame["dtype"]) == {"fp16"}
    assert (frame.loc[frame["phase"] == "prefill", "fanout_k"] == 1).all()
    assert frame["source"].str.startswith("fused_v1[vidur_profile@7d47513").all()
    devices = pd.read_csv(LUT_DIR / "tinyllama-1.1b__iphone-16-pro.csv", keep_default_na=False)
    assert (devices["source"] == "roofline_v1").all()
    assert (devices["energy_mj"] == 0).all()
    assert devices["notes"].str.contains("energy not modelled").all()


def test_over_memory_rows_are_kept_and_marked():
    frame = pd.read_csv(LUT_DIR / "llama-2-70b__a100-sxm4-80gb.csv", keep_default_na=False)
    flagged = frame[frame["notes"].str.startswith("exceeds memory")]
    assert len(flagged) > 0
    capacity = flagged["tensor_parallel"] * 80 * 1024
    assert (flagged["peak_mem_mb"] > capacity).all()
    fine = frame[frame["notes"] == ""]
    assert (fine["peak_mem_mb"] <= fine["tensor_parallel"] * 80 * 1024).all()


def test_lookups_through_the_simulator_match_the_rows():
    manager = LutManager([load_lut(LUT_DIR / "llama-2-7b__a100-sxm4-80gb.csv")])
    key = LutKey("verify", "llama-2-7b", "a100-sxm4-80gb", 1, 1, "fp16")
    low = manager.lookup(key, 1024, 8, 4).latency_ms
    high = manager.lookup(key, 2048, 8, 4).latency_ms
    mid = manager.lookup(key, 1536, 8, 4).latency_ms
    assert low < mid < high
    assert 10 < low < 40  # one verify pass of a 7B model on an A100, batch 8


def test_codellama_34b_decode_stands_to_ml_energy_v2_as_the_profiled_models_do():
    check = tpot_check()
    assert [p.batch for p in check.checked][:2] == [63.49, 127.01]
    assert {p.model for p in check.references} == {"llama-3.1-70b", "llama-3.1-8b"}
    assert check.ok
    assert abs(check.deviation) < 0.1
    # v2's time per output token is several decode steps, for every model.
    assert all(0.15 < p.ratio < 0.45 for p in (*check.checked, *check.references))


def test_spot_checks_agree_with_published_figures():
    checks = spot_checks(LUT_DIR)
    assert len(checks) == 8
    assert all(abs(c.deviation) <= SPOT_TOLERANCE for c in checks)
    distserve_tp4 = next(c for c in checks if "TP4 batch 1" in c.name)
    assert abs(distserve_tp4.deviation) < 0.1


def test_catalog_lists_every_file_with_its_inputs(names):
    text = (LUT_DIR / "CATALOG.md").read_text(encoding="utf-8")
    for name in names:
        assert f"### {name}" in text
    assert "7d47513363ec447a741ac5e47241580b47724fbf" in text
    assert "Generator version" in text
    assert "galaxy-s25" in text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (12.3456789, "12.3457"),
        (131601.4, "131601"),
        (2.5e-06, "0.0000025"),
        (80.0, "80"),
    ],
)
def test_numbers_are_written_positionally_with_six_digits(value, text):
    assert format_number(value) == text
    assert np.isclose(float(format_number(value)), value, rtol=1e-5)
