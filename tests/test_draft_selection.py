"""Per-request drafter-model selection: scenario keys, the built-in policies, the engine.

The scenarios here use only shipped LUTs and acceptance curves: Llama-68M and
TinyLlama-1.1B measured on an iPhone 16 Pro draft for Llama-2-7B on an A100.
No curve is measured for these pairs, so two shipped Vicuna-7B curves stand
in (Spec-Bench SpS, alpha 0.561, for Llama-68M; EAGLE-2, alpha 0.770, for
TinyLlama): the tests need two models that differ in speed and acceptance,
not the true acceptance of these pairs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from policies.draft_selection import (
    AcceptanceSpeed,
    AcceptanceSpeedParams,
    First,
    FirstParams,
    Fixed,
    FixedParams,
    tokens_per_second,
)
from policies.views import DraftCandidate, DraftModelQuery
from simulator import run
from simulator.engine.core import Engine
from simulator.engine.draft_device import DraftDevice
from simulator.engine.runtime import build_runtime
from simulator.rng import RandomStreams
from simulator.scenario import load_scenario
from simulator.validate import validate_file
from simulator.workload.run_requests import build_requests
from tests.engine_fixtures import synthetic

REPO = Path(__file__).resolve().parent.parent
SLOW_FIRST = ["tinyllama", "llama-68m"]


def _document(models: Any = SLOW_FIRST, policy: str | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "scenario_id": "draft_selection",
        "seed": 11,
        "workload": synthetic(40, 2.0, 256, 64),
        "network": {"links": [{"src": "phones", "dst": "pool", "rtt_ms": 20, "bw_mbps": 50}]},
        "hardware_profiles": [
            {
                "id": "phones",
                "type": "draft",
                "profile": str(REPO / "device_profiles/iphone-16-pro.yaml"),
                "count": 8,
                "model": models,
            },
            {
                "id": "pool",
                "type": "target",
                "profile": str(REPO / "device_profiles/a100-tp1.yaml"),
            },
        ],
        "speculation": {
            "mode": "distributed",
            "k": 4,
            "drafter_models": [
                {
                    "name": "llama-68m",
                    "lut": str(REPO / "lut/llama-68m__iphone-16-pro.csv"),
                    "acceptance": "sps",
                },
                {
                    "name": "tinyllama",
                    "model": "tinyllama-1.1b",
                    "lut": str(REPO / "lut/tinyllama-1.1b__iphone-16-pro.csv"),
                    "acceptance": "eagle2",
                },
            ],
            "verifier_models": [
                {"name": "llama-2-7b", "lut": str(REPO / "lut/llama-2-7b__a100-sxm4-80gb.csv")}
            ],
            "acceptance_models": [
                {"name": "sps", "file": str(REPO / "acceptance/sps_vicuna-7b.yaml")},
                {"name": "eagle2", "file": str(REPO / "acceptance/eagle2_vicuna-7b.yaml")},
            ],
            # A stand-in for a better drafter: its curve was measured on trees.
            "acceptance_conversion": "tree_as_chain",
        },
        "simulation": {"lut_out_of_range": "clamp"},
    }
    if policy is not None:
        document["scheduler"] = {"draft": {"model_selection": {"policy": policy}}}
    return document


def _write(tmp_path: Path, document: dict[str, Any], name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _messages(path: Path) -> list[str]:
    verdict = validate_file(path)
    assert verdict.error is not None
    return [issue.format() for issue in verdict.error.issues]


# -- the built-in policies on crafted views ------------------------------------


def _query(verify_step_s: float) -> DraftModelQuery:
    """A fast, low-acceptance model and a slow, high-acceptance one; k = 4."""
    fast = DraftCandidate("fast", 0.0, (1 - 0.5**5) / (1 - 0.5), 0.001, 100.0)
    slow = DraftCandidate("slow", 0.0, (1 - 0.8**5) / (1 - 0.8), 0.010, 2000.0)
    return DraftModelQuery(1, "phones", 256, 4, verify_step_s, (fast, slow))


def test_acceptance_speed_prefers_the_fast_model_when_verify_is_cheap():
    # fast: 1.9375 tokens / (4 x 1 + 30) ms = 56.99 tokens/s;
    # slow: 3.3616 tokens / (4 x 10 + 30) ms = 48.02 tokens/s.
    query = _query(0.030)
    fast, slow = query.candidates
    assert tokens_per_second(fast, 4, 0.030) == pytest.approx(1.9375 / 0.034)
    assert tokens_per_second(slow, 4, 0.030) == pytest.approx(3.3616 / 0.070)
    assert AcceptanceSpeed(AcceptanceSpeedParams()).choose(query) == 0


def test_acceptance_speed_prefers_the_accurate_model_when_verify_is_dear():
    # fast: 1.9375 / (4 x 1 + 200) ms = 9.50 tokens/s; slow: 3.3616 / (4 x 10 + 200) ms = 14.01.
    assert AcceptanceSpeed(AcceptanceSpeedParams()).choose(_query(0.200)) == 1


def test_acceptance_speed_breaks_ties_towards_the_earlier_model_and_first_takes_it():
    same = DraftCandidate("a", 0.5, 2.0, 0.002, 1.0)
    query = DraftModelQuery(1, "phones", 256, 4, 0.01, (same, same._replace(name="b")))
    assert AcceptanceSpeed(AcceptanceSpeedParams()).choose(query) == 0
    assert First(FirstParams()).choose(_query(0.200)) == 0


# -- scenario keys -------------------------------------------------------------------


def test_a_list_of_drafter_models_is_accepted_in_order(tmp_path):
    scenario = load_scenario(_write(tmp_path, _document(policy="acceptance_speed")))
    phones = scenario.device("phones")
    assert phones.draft_models == ("tinyllama", "llama-68m")
    assert phones.model == "tinyllama"
    assert scenario.scheduler.draft_selection.name == "acceptance_speed"
    pool = build_runtime(scenario).clients["phones"]
    assert [m.name for m in pool.models] == ["tinyllama", "llama-68m"]


def test_an_unknown_model_in_the_list_is_refused(tmp_path):
    path = _write(tmp_path, _document(["llama-68m", "llama-3b"]))
    lines = _messages(path)
    assert any(
        str(path) in line
        and "hardware_profiles[0].model[1]" in line
        and "'llama-3b'" in line
        and "one of llama-68m, tinyllama" in line
        for line in lines
    ), lines


def test_a_model_listed_twice_is_refused(tmp_path):
    lines = _messages(_write(tmp_path, _document(["llama-68m", "llama-68m"])))
    assert any("hardware_profiles[0].model[1]" in line and "listed twice" in line for line in lines)


def test_a_list_on_a_target_class_is_refused(tmp_path):
    document = _document("llama-68m")
    document["hardware_profiles"][1]["model"] = ["llama-2-7b"]
    lines = _messages(_write(tmp_path, document))
    assert any(
        "hardware_profiles[1].model" in line and "one model name" in line for line in lines
    ), lines


def test_a_selection_policy_with_single_models_is_refused(tmp_path):
    path = _write(tmp_path, _document("llama-68m", policy="acceptance_speed"))
    lines = _messages(path)
    assert any(
        str(path) in line
        and "scheduler.draft.model_selection.policy" in line
        and "'acceptance_speed'" in line
        and '"first" (the default): every draft class runs one drafter model' in line
        for line in lines
    ), lines


def test_a_listed_model_without_a_lut_for_the_device_is_refused(tmp_path):
    document = _document()
    document["speculation"]["drafter_models"][1]["lut"] = str(
        REPO / "lut/tinyllama-1.1b__macbook-m3-max.csv"
    )
    lines = _messages(_write(tmp_path, document))
    assert any(
        "speculation.drafter_models[1].lut" in line
        and "no LUT rows for phones running tinyllama" in line
        for line in lines
    ), lines


# -- the engine ----------------------------------------------------------------------


def _engine(path: Path) -> Engine:
    scenario = load_scenario(path)
    return Engine(build_runtime(scenario), build_requests(scenario), RandomStreams(scenario.seed))


def test_the_view_carries_the_models_predictions_from_luts_and_curves(tmp_path):
    engine = _engine(_write(tmp_path, _document(policy="acceptance_speed")))
    queries: list[DraftModelQuery] = []
    policy = engine.draft_selector

    class Recording:
        def choose(self, query: DraftModelQuery) -> int:
            queries.append(query)
            return int(policy.choose(query))

    engine.dispatcher.draft_selector = Recording()
    engine.run()
    assert len(queries) == 40  # once per request, not per round
    query = queries[0]
    pool = engine.runtime.clients["phones"]
    verify = engine.replicas[0].costs.step["verify"]
    assert query.k == 4 and query.prompt_tokens == 256
    assert query.verify_step_s == verify.at(257, 1, 4)[0]
    for candidate, model, alpha in zip(
        query.candidates, pool.models, (0.76985, 0.561404), strict=True
    ):
        assert candidate.name == model.name
        assert candidate.draft_step_s == model.draft.at(257, 1, 1)[0]
        # An iid curve: E[A + 1] = (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et al. 2023).
        assert candidate.expected_tokens == pytest.approx((1 - alpha**5) / (1 - alpha))
        assert candidate.acceptance == pytest.approx((candidate.expected_tokens - 1) / 4)
        assert candidate.weights_mb == model.prefill.static_mem_mb()
    # TinyLlama drafts 4 x 59.7 ms on the phone; Llama-68M 4 x 2.5 ms: the small one wins.
    assert {q.candidates[0].name for q in queries} == {"tinyllama"}


def _run(tmp_path: Path, name: str, policy: str | None) -> Any:
    return run(load_scenario(_write(tmp_path, _document(policy=policy), f"{name}.yaml")))


def test_acceptance_speed_changes_the_model_and_the_outcome_versus_first(tmp_path):
    first = _run(tmp_path, "first", None)
    chosen = _run(tmp_path, "speed", "acceptance_speed")
    assert set(first.requests["draft_model"]) == {"tinyllama"}
    assert set(chosen.requests["draft_model"]) == {"llama-68m"}
    assert first.summary["speculation"]["requests_by_draft_model"] == {"tinyllama": 40}
    assert chosen.summary["speculation"]["requests_by_draft_model"] == {"llama-68m": 40}
    # The chosen model's curve draws the acceptance (EAGLE-2 stand-in 0.77 vs SpS 0.56) ...
    assert (
        first.summary["speculation"]["acceptance_rate"]
        > chosen.summary["speculation"]["acceptance_rate"]
    )

    # ... and its LUT prices the drafting: 2.5 ms against 59.7 ms per draft step (plus the
    # prefills), so the devices are busy far less per drafted token and TPOT falls.
    def busy_per_drafted_token_s(result: Any) -> float:
        return float(result.output.device_busy_s / result.requests["drafted_tokens"].sum())

    assert busy_per_drafted_token_s(chosen) < busy_per_drafted_token_s(first) / 10
    assert chosen.summary["latency_ms"]["tpot"]["p50"] < first.summary["latency_ms"]["tpot"]["p50"]


def test_same_seed_same_results(tmp_path):
    one = _run(tmp_path, "one", "acceptance_speed")
    two = _run(tmp_path, "two", "acceptance_speed")
    pd.testing.assert_frame_equal(one.requests, two.requests)
    assert one.summary["speculation"] == two.summary["speculation"]


def test_a_burst_runs_one_model_and_each_request_keeps_its_own(tmp_path, monkeypatch):
    """Two models on one device serving four requests at once: bursts never mix them."""
    profile = yaml.safe_load((REPO / "device_profiles/iphone-16-pro.yaml").read_text())
    profile["compute"]["max_concurrent_requests"] = 4
    (tmp_path / "four").mkdir()
    profile_path = tmp_path / "four" / "iphone-16-pro.yaml"
    profile_path.write_text(yaml.safe_dump(profile, sort_keys=False))
    document = _document(policy="acceptance_speed")
    document["hardware_profiles"][0].update(count=1, profile=str(profile_path))
    document["workload"] = synthetic(12, 20.0, 256, 32)
    engine = _engine(_write(tmp_path, document))

    class Alternate:
        def choose(self, query: DraftModelQuery) -> int:
            return query.request_id % 2

    engine.dispatcher.draft_selector = Alternate()
    bursts: list[list[str]] = []
    start_burst = DraftDevice._start_burst

    def recording(self: DraftDevice, batch: list[Any], start: float) -> None:
        bursts.append([req.draft_model for req in batch])
        start_burst(self, batch, start)

    monkeypatch.setattr(DraftDevice, "_start_burst", recording)
    output = engine.run()
    assert all(len(set(models)) == 1 for models in bursts)
    assert any(len(models) > 1 for models in bursts)
    assert {models[0] for models in bursts} == {"tinyllama", "llama-68m"}
    by_id = {r.request_id: r for r in output.records}
    assert all(r.outcome == "completed" for r in by_id.values())
    assert all(
        r.draft_model == ("llama-68m" if rid % 2 else "tinyllama") for rid, r in by_id.items()
    )


def test_first_skips_a_model_that_cannot_serve_the_request(tmp_path):
    """A prompt past Llama-68M's 2,048-token LUTs drafts with the next listed model."""
    document = _document(["llama-68m", "llama-3.2-1b"])
    document["speculation"]["drafter_models"].append(
        {
            "name": "llama-3.2-1b",
            "lut": str(REPO / "lut/llama-3.2-1b__iphone-16-pro.csv"),
            "acceptance": "sps",
        }
    )
    document["workload"] = synthetic(6, 1.0, 3000, 32)
    del document["speculation"]["acceptance_conversion"]  # no model uses the tree curve
    listed = run(load_scenario(_write(tmp_path, document, "listed.yaml")))
    assert set(listed.requests["outcome"]) == {"completed"}
    assert set(listed.requests["draft_model"]) == {"llama-3.2-1b"}
    document["hardware_profiles"][0]["model"] = "llama-68m"
    alone = run(load_scenario(_write(tmp_path, document, "alone.yaml")))
    assert set(alone.requests["reason"]) == {"context_window"}
    assert set(alone.requests["draft_model"]) == {"llama-68m"}


def test_fixed_takes_the_named_model_or_else_the_first():
    query = _query(0.030)
    assert Fixed(FixedParams("slow")).choose(query) == 1
    assert Fixed(FixedParams("fast")).choose(query) == 0
    assert Fixed(FixedParams("absent")).choose(query) == 0


def test_a_fixed_model_drafts_every_request_that_can_run_it(tmp_path):
    document = _document()
    document["scheduler"] = {
        "draft": {"model_selection": {"policy": "fixed", "params": {"model": "llama-68m"}}}
    }
    result = run(load_scenario(_write(tmp_path, document)))
    assert set(result.requests["draft_model"]) == {"llama-68m"}  # not the first listed


def test_a_fixed_model_no_class_chooses_among_is_refused(tmp_path):
    document = _document()
    document["scheduler"] = {
        "draft": {"model_selection": {"policy": "fixed", "params": {"model": "llama-3b"}}}
    }
    lines = _messages(_write(tmp_path, document))
    assert any(
        "scheduler.draft.model_selection.params.model" in line
        and "'llama-3b'" in line
        and "a drafter model listed by a draft class with several models: tinyllama, llama-68m"
        in line
        for line in lines
    ), lines
