"""What the shipped curves say about their data: topology, temperature bins, categories, spread."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from simulator.acceptance import IidModel, PositionalModel, load_acceptance_model
from simulator.acceptance.protocol import RequestTraits
from tests.acceptance_fixtures import load_derive, shipped

ROOT = Path(__file__).resolve().parent.parent
ACCEPTANCE = ROOT / "acceptance"
INPUTS = ACCEPTANCE / "inputs"
CATEGORIES = ("multi_turn", "translation", "summarization", "qa", "math", "rag")
SPECBENCH_CURVES = (
    "sps_vicuna-7b",
    "sps_vicuna-33b",
    "eagle2_vicuna-7b",
    "eagle2_vicuna-33b",
    "eagle3_vicuna-13b",
    "ngram_vicuna-7b",
)


@pytest.fixture(scope="module")
def derive() -> ModuleType:
    return load_derive()


def raw(name: str) -> dict:
    return yaml.safe_load((ACCEPTANCE / f"{name}.yaml").read_text(encoding="utf-8"))


def tokens(name: str, category: str, k: int = 2000) -> float:
    model = load_acceptance_model(ACCEPTANCE / f"{name}.yaml")
    return model.for_request(RequestTraits(0, category, 0.5)).expected_tokens_per_verify(k, 0)


def test_the_readme_listing_and_table_are_generated(derive: ModuleType) -> None:
    readme = (ACCEPTANCE / "README.md").read_text(encoding="utf-8")
    assert derive.readme_with_tables(readme, derive.derive_documents(INPUTS)) == readme


@pytest.mark.parametrize("path", shipped(), ids=lambda p: p.stem)
def test_every_shipped_curve_states_its_topology_and_loads(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    topology = document["topology"]
    assert topology["kind"] in ("chain", "tree")
    if topology["kind"] == "chain":
        assert set(topology) == {"kind"}
    for key in ("method", "target_model", "draft_model", "dataset", "engine"):
        assert key in document, key
    model = load_acceptance_model(path)
    assert model.info.topology.kind == topology["kind"]
    assert model.info.topology.width == topology.get("width")
    assert model.info.topology.nodes == topology.get("nodes")
    assert model.expected_tokens_per_verify(4, 0) > 1.0


def test_topologies_follow_the_sources() -> None:
    chains = ("sps_vicuna-7b", "ngram_vicuna-7b", "eagle3_llama-3.1-8b_vllm-chain")
    chains += ("eagle3_llama-cpp", "ngram_code-edit", "medusa_vicuna-7b", "eagle_qwen2-7b_chain")
    for name in chains:
        assert raw(name)["topology"] == {"kind": "chain"}, name
    # Spec-Bench's eval.sh runs EAGLE-2/3 with --total-token 60 and --top-k 10 (the defaults).
    for name in ("eagle2_vicuna-7b", "eagle2_vicuna-33b", "eagle3_vicuna-13b"):
        assert raw(name)["topology"] == {"kind": "tree", "width": 10, "nodes": 60}, name
    # SGLang PR #4247 and EAGLE issue #143 do not state the tree.
    for name in ("eagle2_llama-3.1-8b", "eagle3_llama-3.1-8b", "eagle_qwen2-7b_tree"):
        assert raw(name)["topology"] == {"kind": "tree"}, name
    assert raw("medusa_vicuna-7b_tree-w2")["topology"] == {"kind": "tree", "width": 2, "nodes": 63}


def test_medusa_tree_rates_are_top_w_accuracies() -> None:
    with (INPUTS / "medusa_head_accuracy_wandb.csv").open(encoding="utf-8") as handle:
        row = next(r for r in csv.DictReader(handle) if r["Name"] == "33b")
    model = load_acceptance_model(ACCEPTANCE / "medusa_vicuna-33b_tree-w2.yaml")
    assert isinstance(model, PositionalModel)
    top2 = [float(row[f"train/medusa{h}_top2"]) for h in range(5)]
    assert model.bins[0].rates == pytest.approx(top2, abs=5e-7)
    assert raw("medusa_vicuna-33b_tree-w2")["topology"]["nodes"] == 1 + 2 + 4 + 8 + 16 + 32


@pytest.mark.parametrize(
    ("name", "temperature", "expected"),
    [
        ("eagle_qwen2-7b_chain", 0.0, 1.70),
        ("eagle_qwen2-7b_chain", 1.0, 1.50),
        ("eagle_qwen2-7b_chain", 0.5, 1.60),
        ("eagle_qwen2-7b_tree", 0.0, 2.19),
        ("eagle_qwen2-7b_tree", 1.0, 1.55),
        ("eagle_qwen2-7b_tree", 0.5, 1.87),
        ("eagle_qwen2-7b_tree", 2.0, 1.55),
    ],
)
def test_qwen2_curves_reach_the_reported_lengths_by_temperature(
    name: str, temperature: float, expected: float
) -> None:
    model = load_acceptance_model(ACCEPTANCE / f"{name}.yaml")
    assert isinstance(model, IidModel)
    assert model.temperatures == (0.0, 1.0)
    assert model.expected_tokens_per_verify(2000, 0, temperature) == pytest.approx(expected)


def test_qwen2_chain_interpolates_linearly_in_temperature() -> None:
    model = load_acceptance_model(ACCEPTANCE / "eagle_qwen2-7b_chain.yaml")
    for k in (1, 3, 5):
        cold = model.expected_tokens_per_verify(k, 0, 0.0)
        hot = model.expected_tokens_per_verify(k, 0, 1.0)
        assert cold > hot
        assert model.expected_tokens_per_verify(k, 0, 0.5) == pytest.approx((cold + hot) / 2)
        assert model.expected_tokens_per_verify(k, 0, 0.25) == pytest.approx(
            0.75 * cold + 0.25 * hot
        )


def test_category_rule_reproduces_a_hand_computed_value() -> None:
    # sps_vicuna-7b averages two rows: tau 2.28 on both, multi-turn speed-up 1.94 of 1.79
    # overall on the RTX 3090 and 1.66 of 1.52 on the A100.
    tau_c = (2.28 * 1.94 / 1.79 + 2.28 * 1.66 / 1.52) / 2
    alpha_c = raw("sps_vicuna-7b")["categories"]["multi_turn"][0]["alpha"]
    assert alpha_c == pytest.approx(1 - 1 / tau_c, abs=5e-7)
    assert tokens("sps_vicuna-7b", "multi_turn") == pytest.approx(tau_c, rel=1e-5)
    # eagle3_vicuna-13b has one row (A100): tau 5.71, math speed-up 3.42 of 3.02 overall.
    assert tokens("eagle3_vicuna-13b", "math") == pytest.approx(5.71 * 3.42 / 3.02, rel=1e-5)
    # Translation is the hardest category for every Spec-Bench method here.
    for name in SPECBENCH_CURVES:
        by_category = {c: tokens(name, c) for c in CATEGORIES}
        assert min(by_category, key=by_category.__getitem__) == "translation", name


def test_category_bins_come_from_the_leaderboard_rows() -> None:
    with (INPUTS / "specbench_leaderboard.csv").open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["method"] == "EAGLE2"]
    rows = [r for r in rows if r["target_model"] == "Vicuna-7B-v1.3"]
    assert len(rows) == 2
    expected = sum(
        float(r["mean_accepted_tokens"]) * float(r["speedup_rag"]) / float(r["speedup_overall"])
        for r in rows
    ) / len(rows)
    assert tokens("eagle2_vicuna-7b", "rag") == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("name", SPECBENCH_CURVES)
def test_spread_concentration_reproduces_the_category_variance(name: str) -> None:
    document = raw(name)
    assert sorted(document["categories"]) == sorted(CATEGORIES)
    alphas = [document["categories"][c][0]["alpha"] for c in CATEGORIES]
    mean = sum(alphas) / len(alphas)
    variance = sum((a - mean) ** 2 for a in alphas) / len(alphas)
    spread = document["request_spread"]
    assert spread["distribution"] == "beta"
    c = spread["concentration"]
    assert mean * (1 - mean) / (c + 1) == pytest.approx(variance, rel=1e-5)
    model = load_acceptance_model(ACCEPTANCE / f"{name}.yaml")
    assert model.categories == tuple(sorted(CATEGORIES))
    assert model.info.request_spread is not None
    assert model.info.request_spread.concentration == c


def test_only_curves_with_categories_carry_a_spread() -> None:
    for path in shipped():
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        has_categories = bool(document.get("categories"))
        assert has_categories == (path.stem in SPECBENCH_CURVES), path.stem
        assert (document.get("request_spread") is not None) == has_categories, path.stem


def test_no_curve_depends_on_context_length() -> None:
    for path in shipped():
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        bins = [*document["bins"], *(b for v in document.get("categories", {}).values() for b in v)]
        assert all("context_len" not in item for item in bins), path.stem
    readme = (ACCEPTANCE / "README.md").read_text(encoding="utf-8")
    assert "No source gives acceptance by context length" in readme


def test_beta_fit_formula(derive: ModuleType) -> None:
    fit = derive.beta_fit([0.5, 0.7])
    assert fit.mean == pytest.approx(0.6)
    assert fit.variance == pytest.approx(0.01)
    assert fit.concentration == pytest.approx(0.6 * 0.4 / 0.01 - 1)
    with pytest.raises(ValueError):
        derive.beta_fit([0.5, 0.5])
    assert math.isclose(derive.full_tree_nodes(2, 5), 63)
