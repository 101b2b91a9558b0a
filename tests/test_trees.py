"""Token-tree fused rounds (``speculation.tree``): pricing, engine terms, refusals, runs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.lanes import FUSED
from simulator import load_scenario, run
from simulator.engine.core import _k_reserve
from simulator.engine.runtime import build_runtime
from simulator.engine.tree_costs import TreeRoundCost
from simulator.errors import InputError
from simulator.lut import LutKey
from simulator.scenario.load import absolute_paths

H100 = "h100-sxm5-80gb"
HEAD = "llama-3-8b.eagle3"
TARGET = "llama-3-8b"
CHAIN: dict[str, Any] = {
    "speculation.tree": None,
    # The tree-measured curve drafting chains, by the rule that allows it.
    "speculation.acceptance_conversion": "tree_as_chain",
}

BASE: dict[str, Any] = {
    "scenario_id": "tree",
    "seed": 3,
    "workload": {
        "source": "synthetic",
        "synthetic": {
            "num_requests": 16,
            "prompt_tokens": {"dist": "fixed", "value": 512},
            "output_tokens": {"dist": "fixed", "value": 64},
        },
        "closed_loop": {"users": 8, "think_time_s": 0},
        "slo": {"ttft_ms": 1000, "tpot_ms": 100},
    },
    "hardware_profiles": [
        {
            "id": "h100",
            "type": "target",
            "profile": "builtin:device_profiles/h100-tp1.yaml",
            "count": 1,
        }
    ],
    "speculation": {
        "mode": "fused",
        "k": 5,
        "fused_models": [
            {
                "name": "eagle3",
                "model": f"{TARGET}+{HEAD}",
                "lut": f"builtin:lut/{TARGET}+{HEAD}__{H100}.csv",
                "acceptance": "e3",
            }
        ],
        "acceptance_models": [
            {"name": "e3", "file": "builtin:acceptance/eagle3_llama-3.1-8b.yaml"}
        ],
        "tree": {
            "depth": 5,
            "width": 4,
            "nodes": 8,
            "drafter": {"lut": f"builtin:lut/{HEAD}__{H100}.csv"},
            "verifier": {"lut": f"builtin:lut/{TARGET}__{H100}.csv"},
        },
    },
}


def _write(tmp_path: Path, edit: dict[str, Any] | None = None, name: str = "s.yaml") -> Path:
    doc = json.loads(json.dumps(BASE))
    for dotted, value in (edit or {}).items():
        node = doc
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[part]
        if value is None and last == "tree":
            node[last] = None
        else:
            node[last] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _tree_cost(tmp_path: Path, **edit: Any) -> TreeRoundCost:
    scenario = load_scenario(_write(tmp_path, edit or None))
    cost = build_runtime(scenario).replicas[0].costs.step[FUSED]
    assert isinstance(cost, TreeRoundCost)
    return cost


def _key(phase: str, model: str) -> LutKey:
    return LutKey(phase, model, H100, 1, 1, "fp16")


def _gpu_parts_ms(cost: TreeRoundCost, context: float, rows: float) -> tuple[float, float]:
    """(head levels, tree verify) GPU milliseconds straight from the two LUTs."""
    tree = cost.tree
    luts = cost.manager
    head = sum(
        luts.lookup(_key("verify", HEAD), context + level, rows, tree.width - 1).latency_ms
        for level in range(tree.depth)
    )
    verify = luts.lookup(_key("verify", TARGET), context, rows, tree.nodes - 1).latency_ms
    return head, verify


def test_tree_verify_is_priced_at_its_nodes(tmp_path):
    """A tree's verify is the target's verify row at fanout_k = T - 1, plus the head levels."""
    cost = _tree_cost(tmp_path)
    context, n = 1024.0, 8
    head_ms, verify_ms = _gpu_parts_ms(cost, context, n)
    gpu = cost.gpu_lookup(context, n, 5)
    assert gpu.latency_s * 1000.0 == pytest.approx(head_ms + verify_ms)
    # The verify term is the T-token row, not the chain's k + 1 = 6 tokens.
    chain_verify = cost.manager.lookup(_key("verify", TARGET), context, n, 5).latency_ms
    assert verify_ms > chain_verify
    # Under cuda-graph the host time is paid once for the whole round, on n x T + n x w x D
    # sampled positions.
    pricer = cost.pricer
    assert pricer is not None and pricer.profile.charged == "per_step"
    host_ms = pricer.fit.time_ms(n, n * 8 + n * 4 * 5)
    step = cost.lookup(context, n, 5)
    assert step.latency_s * 1000.0 == pytest.approx(head_ms + verify_ms + host_ms)


def test_more_nodes_cost_exactly_the_larger_verify(tmp_path):
    small = _tree_cost(
        tmp_path, **{"speculation.tree": {**BASE["speculation"]["tree"], "nodes": 6}}
    )
    big = _tree_cost(tmp_path)
    context, n = 2048.0, 4
    lookup = big.manager.lookup
    target = _key("verify", TARGET)
    difference = lookup(target, context, n, 7).latency_ms - lookup(target, context, n, 5).latency_ms
    gap = big.gpu_lookup(context, n, 5).latency_s - small.gpu_lookup(context, n, 5).latency_s
    assert gap * 1000.0 == pytest.approx(difference)


def test_each_level_is_one_head_step_at_the_tree_width(tmp_path):
    wide = _tree_cost(tmp_path)
    assert wide.head_key == _key("verify", HEAD)
    context, n = 700.0, 16
    head_ms, _ = _gpu_parts_ms(wide, context, n)
    levels = [
        wide.manager.lookup(_key("verify", HEAD), context + level, n, 3).latency_ms
        for level in range(5)
    ]
    assert head_ms == pytest.approx(sum(levels))
    chain = _tree_cost(
        tmp_path,
        **{"speculation.tree": {**BASE["speculation"]["tree"], "width": 1, "nodes": 6}},
    )
    assert chain.head_key == _key("draft_decode", HEAD)
    expected = (
        sum(
            chain.manager.lookup(_key("draft_decode", HEAD), context + level, n, 1).latency_ms
            for level in range(5)
        )
        + chain.manager.lookup(_key("verify", TARGET), context, n, 5).latency_ms
    )
    assert chain.gpu_lookup(context, n, 5).latency_s * 1000.0 == pytest.approx(expected)


def test_vidur_profile_charges_one_host_time_per_forward(tmp_path):
    cost = _tree_cost(
        tmp_path,
        hardware_profiles=[{**BASE["hardware_profiles"][0], "engine": "vidur-vllm-v0"}],
    )
    pricer = cost.pricer
    assert pricer is not None and pricer.profile.charged == "per_forward"
    n = 4
    fit = pricer.fit
    expected = 5 * fit.time_ms(n, n * 4) + fit.time_ms(n, n * 8)
    assert pricer.host_ms(n, 5) == pytest.approx(expected)
    assert len(pricer._forwards(n, 5)) == 5 + 1


def test_eager_engine_launches_every_level_and_the_verify(tmp_path):
    cost = _tree_cost(
        tmp_path,
        hardware_profiles=[{**BASE["hardware_profiles"][0], "engine": "eager-pytorch"}],
    )
    pricer = cost.pricer
    assert pricer is not None and pricer.profile.launch is not None
    launch = pricer.profile.launch
    expected = 5 * launch.forward_ms(HEAD) + launch.forward_ms(TARGET)
    assert pricer.launch_ms(3, 5) == pytest.approx(expected)


def test_tree_rounds_reserve_their_nodes_of_kv(tmp_path):
    settings = build_runtime(load_scenario(_write(tmp_path))).settings
    assert settings.tree is not None and settings.tree.nodes == 8
    assert _k_reserve(settings) == 8
    chain = build_runtime(load_scenario(_write(tmp_path, CHAIN))).settings
    assert _k_reserve(chain) == chain.k_max + 1


def test_resolved_scenario_makes_the_tree_luts_absolute(tmp_path):
    doc = json.loads(json.dumps(BASE))
    doc["speculation"]["tree"]["verifier"]["lut"] = "target.csv"
    out = absolute_paths(doc, tmp_path / "s.yaml")
    assert out["speculation"]["tree"]["verifier"]["lut"] == str((tmp_path / "target.csv").resolve())
    assert out["speculation"]["tree"]["drafter"]["lut"].startswith("builtin:")


def _refused(tmp_path: Path, edit: dict[str, Any]) -> str:
    with pytest.raises(InputError) as caught:
        load_scenario(_write(tmp_path, edit))
    return str(caught.value)


@pytest.mark.parametrize(
    ("edit", "fragments"),
    [
        (
            {"speculation.tree": {**BASE["speculation"]["tree"], "nodes": 22}},
            ["speculation.tree.nodes", "22", "from depth + 1 (6) to 1 + depth x width (21)"],
        ),
        (
            {"speculation.tree": {**BASE["speculation"]["tree"], "nodes": 5}},
            ["speculation.tree.nodes", "from depth + 1 (6)"],
        ),
        ({"speculation.k": 4}, ["speculation.k", "5 (speculation.tree.depth"]),
        (
            {"speculation.adaptive_k": {"enabled": True, "controller": "acceptance_feedback"}},
            ["speculation.adaptive_k.enabled", "fixed tree"],
        ),
        (
            {"scheduler": {"arbitration": {"policy": "chunked_prefill"}}},
            ["scheduler.arbitration.policy", "prefill_first with speculation.tree"],
        ),
        (
            {
                "speculation.tree": {
                    **BASE["speculation"]["tree"],
                    "drafter": {"lut": "builtin:lut/llama-3-8b.eagle3__a100-sxm4-80gb.csv"},
                }
            },
            ["speculation.tree.drafter", "verify rows of model llama-3-8b.eagle3 on " + H100],
        ),
    ],
)
def test_bad_trees_are_refused_with_one_clear_message(tmp_path, edit, fragments):
    message = _refused(tmp_path, edit)
    for fragment in fragments:
        assert fragment in message, message
    assert "s.yaml" in message


def test_trees_are_refused_outside_mode_fused(tmp_path):
    doc = json.loads(json.dumps(BASE))
    spec = doc["speculation"]
    spec["mode"] = "none"
    spec["verifier_models"] = [{"name": TARGET, "lut": f"builtin:lut/{TARGET}__{H100}.csv"}]
    for key in ("fused_models", "acceptance_models", "k"):
        del spec[key]
    path = tmp_path / "none.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert "1 problem" in message, message
    assert "speculation.tree" in message and "token tree outside mode fused" in message, message


def _summary(tmp_path: Path, edit: dict[str, Any] | None = None) -> dict[str, Any]:
    result = run(load_scenario(_write(tmp_path, edit)))
    return json.loads(json.dumps(result.summary, sort_keys=True))


def test_the_tree_key_changes_a_run_and_runs_repeat(tmp_path):
    tree = _summary(tmp_path)
    chain = _summary(tmp_path, CHAIN)
    assert tree["latency_ms"] != chain["latency_ms"]
    assert _summary(tmp_path) == tree


def test_the_speedup_script_scenarios_load(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "speculation_speedup",
        Path(__file__).resolve().parent.parent / "scripts" / "speculation_speedup.py",
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)
    spec.loader.exec_module(script)
    tree = next(d for d in script.DRAFTERS if d.tree is not None)
    assert (tree.tree["depth"], tree.tree["width"], tree.tree["nodes"]) == (5, 4, 8)
    for engine in script.ENGINES:
        for drafter in (None, *script.DRAFTERS):
            path = tmp_path / "s.yaml"
            path.write_text(yaml.safe_dump(script.scenario(2, engine, drafter)), encoding="utf-8")
            assert load_scenario(path).speculation.mode == ("none" if drafter is None else "fused")
