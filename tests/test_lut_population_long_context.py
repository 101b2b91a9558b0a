"""The 128k-window targets (Llama-3.1-8B, Llama-3.1-70B) and the long-context attention check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lut_population.build import build_tables
from lut_population.catalog import render_catalog
from lut_population.inputs import load_microbench_iterations, load_models
from lut_population.long_context import (
    MIN_CONTEXT,
    slope_comparisons,
    slope_summaries,
)
from lut_population.plan import (
    FUSED_PAIRS,
    PROFILE_OF,
    TARGETS,
    build_plan,
    gpu_model,
    profiled_model,
)
from simulator.lut import LutManager, load_lut

LUT_DIR = Path(__file__).resolve().parents[1] / "lut"
A100 = "a100-sxm4-80gb"
H100 = "h100-sxm5-80gb"
LONG = ("llama-3.1-8b", "llama-3.1-70b")


def test_new_models_load_with_their_real_window():
    models = load_models()
    for model_id in LONG:
        assert models[model_id].max_context == 131072
        assert models[model_id].vocab_size == 128256
    assert TARGETS["llama-3.1-8b"] == (1, 2, 4, 8)
    assert TARGETS["llama-3.1-70b"] == (2, 4, 8)
    assert {("llama-3.1-8b", "llama-3.2-1b"), ("llama-3.1-70b", "llama-3.2-1b")} <= set(FUSED_PAIRS)


def test_shared_profiles_have_the_same_blocks_and_their_own_lm_head():
    assert profiled_model("llama-3.1-8b") == "llama-3-8b"
    assert profiled_model("llama-3.1-70b") == "llama-2-70b"
    new, old = gpu_model("llama-3.1-70b", A100, 4), gpu_model("llama-2-70b", A100, 4)
    tokens = np.array([1.0, 64.0, 4096.0])
    assert np.allclose(new.block_ms(tokens), old.block_ms(tokens))
    ratio = new.ops.lm_head_ms(tokens) / old.ops.lm_head_ms(tokens)
    assert np.allclose(ratio, 128256 / 32000)
    assert "[llama-2-70b]" in new.source
    assert "[llama-3-8b]" in gpu_model("llama-3.1-8b", H100, 1).source


def test_a_profile_of_different_blocks_is_refused(monkeypatch):
    monkeypatch.setitem(PROFILE_OF, "llama-3.1-8b", "llama-2-7b")
    with pytest.raises(ValueError, match="num_kv_heads 8 != 32"):
        profiled_model("llama-3.1-8b")


@pytest.mark.slow
def test_committed_long_context_files_cover_32k_and_more():
    names = {f.name for f in build_plan()}
    for model in (*LONG, *(f"{m}+llama-3.2-1b" for m in LONG)):
        for hw in (A100, H100):
            name = f"{model}__{hw}.csv"
            assert name in names
            manager = LutManager([load_lut(LUT_DIR / name)])
            keys = manager.keys()
            assert keys
            for key in keys:
                assert manager.grid(key).context_len[-1] >= 32768
                assert manager.grid(key).context_len[-1] == 131072


def test_microbench_copy_is_the_raw_file():
    frame = load_microbench_iterations()
    assert len(frame) == 386
    assert "latency_ms_median" in frame.columns and "machine" in frame.columns
    assert set(frame["mode"]) >= {"graph", "eager", "graph-packgqa"}


def test_context_slopes_are_compared_and_summarised():
    items = slope_comparisons()
    assert {c.phase for c in items} == {"draft_decode", "verify", "prefill"}
    assert {c.model for c in items} == {"llama-2-7b", "llama-3-8b"}
    assert all(c.contexts[0] >= MIN_CONTEXT and len(c.contexts) >= 2 for c in items)
    assert all(c.measured_ms_per_1k > 0 and c.composed_ms_per_1k > 0 for c in items)
    summaries = {s.label: s for s in slope_summaries()}
    assert summaries["all"].series == len(items)
    # the extrapolated rule's slope stays within a factor of 3 of every measured one, and
    # its median is near 1 once the batch fills the GPU
    assert all(1 / 3 < c.slope_ratio < 3 for c in items)
    assert 0.8 < summaries["batch >= 2"].median_ratio < 1.25


def test_catalog_reports_the_long_context_check():
    small = tuple(f for f in build_plan() if f.name.startswith("llama-68m__a100"))
    text = render_catalog(build_tables(small))
    assert "### Long context: attention beyond the profiled 4 096 tokens" in text
    assert "median slope ratio" in text
    assert "inputs/microbench_h100/iterations.csv" in text
