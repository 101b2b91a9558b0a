"""Draft heads (EAGLE, EAGLE-3, Medusa, MTP): cited facts, composition, LUT files, H100 spot check."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lut_population.cpu_overhead import cpu_overhead_fit
from lut_population.head_spot_checks import (
    HEAD_MEDIAN_TOLERANCE,
    HEAD_POINT_TOLERANCE,
    head_points,
    head_summaries,
)
from lut_population.heads import HeadGpuModel, head_shape
from lut_population.inputs import load_heads
from lut_population.paths import INPUTS_DIR, LUT_DIR
from lut_population.phases import FusedRoundCost, SinglePhaseCost, phase_work
from lut_population.plan import TARGETS, file_name, gpu_model, head_model
from lut_population.tree_spot_checks import tree_points, tree_summaries
from lut_population.work import Work
from simulator.errors import InputError
from simulator.lut import LutKey, LutManager, load_lut

H100 = "h100-sxm5-80gb"
A100 = "a100-sxm4-80gb"


def one(batch: float, new: float, cached: float, logits: float) -> Work:
    return Work(np.array([batch]), np.array([new]), np.array([cached]), np.array([logits]))


def test_every_head_fact_is_cited_and_fits_its_target():
    heads = load_heads()
    assert {s.kind for s in heads.values()} == {"eagle", "eagle3", "medusa"}
    for head_id, spec in heads.items():
        assert head_id == f"{spec.target}.{spec.kind}"
        assert spec.target in TARGETS
        assert spec.name.split("/")[-1] in spec.source or spec.name in spec.source
        assert "arXiv" in spec.source or "huggingface.co" in spec.source
    medusa = heads["llama-2-7b.medusa"]
    assert (medusa.lm_heads, medusa.residual_blocks, medusa.decoder_layers) == (5, 1, 0)
    eagle3 = heads["llama-3-8b.eagle3"]
    assert (eagle3.fc_inputs, eagle3.qkv_inputs, eagle3.lm_head_vocab) == (3, 2, 32000)
    assert eagle3.own_lm_head and not heads["llama-3-8b.eagle"].own_lm_head
    assert not eagle3.fc_each_step and heads["llama-3-8b.eagle"].fc_each_step


def test_a_bad_head_entry_names_the_key(tmp_path: Path):
    (tmp_path / "models.yaml").write_text(
        (INPUTS_DIR / "models.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "heads.yaml").write_text(
        "heads:\n  x.eagle:\n    kind: hydra\n    target: nope\n", encoding="utf-8"
    )
    with pytest.raises(InputError) as caught:
        load_heads(tmp_path)
    text = caught.value.render()
    assert "heads.x.eagle.kind" in text and "heads.x.eagle.target" in text
    assert "heads.x.eagle.decoder_layers" in text and "heads.x.eagle.fc_each_step" in text


def test_an_eagle_step_is_one_target_layer_plus_fc_embedding_and_lm_head():
    head = head_model("llama-2-7b.eagle", H100, 1)
    target = head.target
    work = one(16.0, 1.0, 1024.0, 1.0)
    tokens = work.tokens
    layer = (
        target.block_ms(tokens)
        + target.attention.time_ms(work.batch, work.new, work.cached)
        + target.all_reduce_ms(tokens)
    )
    expected = (
        target.ops.time_ms("emb", tokens)
        + 2 * target.ops.time_ms("attn_post_proj", tokens)
        + layer
        + target.ops.time_ms("input_layernorm", tokens)
        + target.ops.lm_head_ms(work.logit_rows)
    )
    assert head.latency_ms(work) == pytest.approx(expected)
    assert head.shape.num_layers == 1 and head.shape.hidden_size == 4096


def test_eagle3_has_a_wider_fc_and_qkv_but_a_smaller_lm_head():
    eagle = head_model("llama-3-8b.eagle", H100, 1)
    eagle3 = head_model("llama-3-8b.eagle3", H100, 1)
    work = one(1.0, 1.0, 1024.0, 1.0)
    ops = eagle.target.ops
    tokens = work.tokens
    extra = ops.time_ms("attn_post_proj", tokens) + ops.time_ms("attn_pre_proj", tokens)
    lm_saved = ops.lm_head_ms(tokens) * (1.0 - 32000 / 128256)
    difference = eagle3.latency_ms(work) - eagle.latency_ms(work)
    assert difference == pytest.approx(extra - lm_saved)
    assert eagle3.weights_mb() > eagle.weights_mb()  # its own 32000 x 4096 LM head


def test_eagle3_runs_its_fc_in_the_first_step_of_a_round_only():
    eagle3 = head_model("llama-3-8b.eagle3", H100, 1)
    later = eagle3.later_step()
    work = one(4.0, 1.0, 1024.0, 1.0)
    fc = 3 * eagle3.target.ops.time_ms("attn_post_proj", work.tokens)
    assert eagle3.latency_ms(work) - later.latency_ms(work) == pytest.approx(fc)
    assert head_model("llama-3-8b.eagle", H100, 1).later_step().spec.fc_inputs == 2
    target = eagle3.target
    k = np.array([1.0, 4.0])
    context = np.full_like(k, 1024.0)
    batch = np.full_like(k, 4.0)
    fused = FusedRoundCost(target, eagle3, "test", later_draft=later).evaluate(context, batch, k)
    each_with_fc = FusedRoundCost(target, eagle3, "test").evaluate(context, batch, k)
    saved = each_with_fc.latency_ms - fused.latency_ms
    assert saved[0] == pytest.approx(0.0)
    assert saved[1] == pytest.approx(3 * float(fc[0]))


def test_mtp_depth_runs_its_modules_in_sequence():
    eagle = load_heads()["llama-2-7b.eagle"]
    target = gpu_model("llama-2-7b", H100, 1)
    work = one(8.0, 1.0, 512.0, 1.0)
    costs = []
    for depth in (1, 2):
        spec = replace(eagle, model_id="llama-2-7b.mtp", kind="mtp", depth=depth)
        model = HeadGpuModel(spec, target, head_shape(spec, target.shape), "test")
        costs.append(float(model.latency_ms(work)[0]))
        assert model.shape.num_layers == depth
    eagle_model = head_model("llama-2-7b.eagle", H100, 1)
    assert costs[0] == pytest.approx(float(eagle_model.latency_ms(work)[0]))
    assert costs[1] == pytest.approx(2 * costs[0])


def test_a_medusa_step_reads_one_position_and_its_round_drafts_once():
    medusa = head_model("llama-2-7b.medusa", H100, 1)
    short = medusa.latency_ms(phase_work("draft_decode", np.array(128.0), np.array(4.0), 1.0))
    long = medusa.latency_ms(phase_work("draft_decode", np.array(2048.0), np.array(4.0), 1.0))
    assert short == pytest.approx(long)  # no attention, no KV cache
    assert medusa.shape.kv_mib_per_token == 0
    target = gpu_model("llama-2-7b", H100, 1)
    round_cost = FusedRoundCost(target, medusa, "test", one_draft_step=True)
    k = np.arange(1.0, 6.0)
    context = np.full_like(k, 1024.0)
    batch = np.full_like(k, 8.0)
    fused = round_cost.evaluate(context, batch, k).latency_ms
    verify = SinglePhaseCost(target, "verify").evaluate(context, batch, k).latency_ms
    step = medusa.latency_ms(phase_work("draft_decode", context, batch, np.ones_like(k)))
    assert fused - verify == pytest.approx(step)


def test_a_tree_level_of_width_w_reads_the_context_once_per_sequence():
    head = head_model("llama-2-7b.eagle", H100, 1)
    level = head.latency_ms(one(64.0, 8.0, 2048.0, 8.0))
    per_position = head.latency_ms(one(512.0, 1.0, 2048.0, 1.0))
    assert level < 0.5 * per_position  # each candidate priced as its own sequence would reread KV


def test_a_head_step_costs_less_than_a_llama_68m_step_plus_its_host_time():
    table = load_lut(LUT_DIR / "llama-68m__h100-sxm5-80gb.csv")
    key = LutKey("draft_decode", "llama-68m", H100, 1, 1, "fp16")
    manager = LutManager([table])
    grid = manager.grid(key)
    host = cpu_overhead_fit()
    for head_id, spec in load_heads().items():
        head = head_model(head_id, H100, TARGETS[spec.target][0])
        for context in grid.context_len:
            for batch in grid.microbatch:
                work = phase_work(
                    "draft_decode", np.array(float(context)), np.array(float(batch)), 1.0
                )
                draft = manager.lookup(key, context, batch, 1).latency_ms
                separate = draft + float(
                    host.time_ms(np.array(float(batch)), np.array(float(batch)))
                )
                assert float(head.latency_ms(work)) < separate, (head_id, context, batch)


@pytest.mark.slow
def test_the_h100_head_spot_check_passes():
    points = head_points(LUT_DIR)
    assert len(points) == 60
    for summary in head_summaries(points):
        assert abs(summary.median - 1.0) <= HEAD_MEDIAN_TOLERANCE, summary.name
        assert abs(summary.worst - 1.0) <= HEAD_POINT_TOLERANCE, summary.name


@pytest.mark.slow
@pytest.mark.parametrize("hardware", [A100, H100])
def test_head_and_fused_head_files_load(hardware: str):
    for head_id, spec in load_heads().items():
        fused = load_lut(LUT_DIR / file_name(f"{spec.target}+{head_id}", hardware))
        head = load_lut(LUT_DIR / file_name(head_id, hardware))
        manager = LutManager([fused, head])
        for tp in TARGETS[spec.target]:
            key = LutKey("fused_decode", f"{spec.target}+{head_id}", hardware, tp, 1, "fp16")
            ks = manager.grid(key).fanout_k
            assert ks[-1] == (spec.lm_heads if spec.kind == "medusa" else 8)
            step = LutKey("draft_decode", head_id, hardware, tp, 1, "fp16")
            assert manager.lookup(step, 1024, 8, 1).latency_ms > 0


def test_the_h100_tree_verify_check_passes_and_needs_no_mask_factor():
    points = tree_points(LUT_DIR)
    assert len(points) == 80
    lut, mask = tree_summaries(points)
    assert lut.ok and mask.ok
    # The tree mask's own cost (cuDNN against the unmasked block) is within the machines'
    # repeatability at the median, which is why no mask factor is applied.
    assert abs(mask.median - 1.0) < 0.035
