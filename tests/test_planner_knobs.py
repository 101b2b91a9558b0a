"""The planner's speculation and batching knobs: k, k_controller, max_batch, max_microbatch,
draft_model.

For each knob: the window runtime of a value differs from the run's as
intended; a planner given a list where one value is best by construction
chooses it, and the run's work after the first planning round uses it; bad
candidate lists are refused with the file, key, value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator import load_scenario, run
from simulator.cli import main as simulate_main
from simulator.engine.runtime import build_runtime
from simulator.engine.tracing import ListTracer, Span
from simulator.outputs import PLANNER_LOG, write_results
from simulator.planner.candidates import Candidate, enumerate_candidates, nearest_index
from simulator.planner.knobs import KNOBS
from simulator.scenario.model import Scenario
from simulator.validate import validate_file
from tests.engine_fixtures import write_lut, write_scenario

INTERVAL_S = 5.0
"""Planning interval (and window) of every planner here: the first round is at 5 s."""

Edit = Callable[[dict[str, Any]], None]


def _trace(path: Path, rate_per_s: float, duration_s: float) -> None:
    """Evenly spaced arrivals of 100-token prompts and 50-token outputs."""
    rows = "".join(f"{i / rate_per_s:.6f},100,50\n" for i in range(int(rate_per_s * duration_s)))
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)


def _write(
    tmp_path: Path,
    *,
    candidates: dict[str, list[Any]] | None = None,
    rate_per_s: float = 4.0,
    duration_s: float = 30.0,
    tpot_ms: float = 100.0,
    alpha: float = 0.7,
    k: int = 4,
    verify_ms: Callable[[float, float, float], float] = lambda c, b, k: 30.0,
    draft_ms: float = 1.0,
    edit: Edit | None = None,
) -> Path:
    """A distributed scenario on one replica; with ``candidates``, a planner choosing among them."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    _trace(tmp_path / "trace.csv", rate_per_s, duration_s)
    planner: dict[str, Any] = {}
    if candidates is not None:
        planner = {
            "enabled": True,
            "interval_s": INTERVAL_S,
            "window_s": INTERVAL_S,
            "model_load_s": 0.0,
            "objectives": ["goodput", "p95_tpot"],
            "candidates": candidates,
        }
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload={
            "source": "trace://trace.csv",
            "format": "csv",
            "slo": {"ttft_ms": 2000, "tpot_ms": tpot_ms},
        },
        target_phases={"prefill": lambda c, b, _k: 5.0, "verify": verify_ms},
        draft_phases={"prefill": lambda c, b, _k: 1.0, "draft_decode": lambda c, b, _k: draft_ms},
        alpha=alpha,
        k=k,
        clients=400,
        extra={"planner": planner},
    )
    if edit is not None:
        document = yaml.safe_load(path.read_text())
        edit(document)
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _set(dotted: str, value: Any) -> Edit:
    def change(document: dict[str, Any]) -> None:
        node = document
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value

    return change


def _two_drafters(tmp_path: Path, order: list[str]) -> Edit:
    """The laptops list two drafter models: ``slow-draft`` (40 ms a token) and ``draft-model``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_lut(
        tmp_path / "draft_slow.csv",
        "slow-draft-model",
        "rtx-4050-laptop",
        {"prefill": lambda c, b, _k: 1.0, "draft_decode": lambda c, b, _k: 40.0},
    )

    def change(document: dict[str, Any]) -> None:
        spec = document["speculation"]
        spec["drafter_models"].append(
            {"name": "slow-draft", "model": "slow-draft-model", "lut": "draft_slow.csv"}
        )
        for model in spec["drafter_models"]:
            model["acceptance"] = "acc"
        document["hardware_profiles"][0]["model"] = order

    return change


def _load(path: Path) -> Scenario:
    return load_scenario(path)


def _traced(scenario: Scenario) -> tuple[Any, list[Span]]:
    tracer = ListTracer()
    result = run(scenario, tracer=tracer)
    spans = [s for s in tracer.spans if s.place == "replica" and s.phase == "verify"]
    return result, spans


def _chosen(result: Any) -> set[str]:
    log = result.planner_log
    chosen = log[log["chosen"]]
    assert len(chosen) >= 4
    return set(chosen["candidate"])


def _messages(path: Path) -> list[str]:
    verdict = validate_file(path)
    assert verdict.error is not None
    lines = [issue.format() for issue in verdict.error.issues]
    for issue in verdict.error.issues:
        assert issue.file and issue.value and issue.allowed
    return lines


def _refused(path: Path, key: str, value: str, allowed: str) -> None:
    lines = _messages(path)
    matching = [line for line in lines if path.name in line and key in line and value in line]
    assert matching, "\n".join(lines)
    assert any(allowed in line for line in matching), "\n".join(lines)


# -- candidate values: numbers and names ------------------------------------------------


def test_candidates_hold_numbers_as_floats_and_names_as_they_are():
    values = {"k": [1, 4], "draft_model": ["a", "b"]}
    candidates = enumerate_candidates(values)
    assert [c.key for c in candidates] == [
        "k=1 draft_model=a",
        "k=1 draft_model=b",
        "k=4 draft_model=a",
        "k=4 draft_model=b",
    ]
    assert candidates[0].get("k") == 1.0 and isinstance(candidates[0].get("k"), float)
    assert candidates[0].get("draft_model") == "a"
    assert nearest_index(["a", "b", "c"], "c") == 2
    assert nearest_index(["a", "b"], "") == 0  # not listed: the first
    assert nearest_index([1, 4, 8], 5.0) == 1


# -- (a) window runtimes ------------------------------------------------------------------


def test_each_knob_sets_its_part_of_a_window_runtime(tmp_path):
    path = _write(tmp_path, k=6, edit=_two_drafters(tmp_path, ["slow-draft", "draft-model"]))
    runtime = build_runtime(_load(path))
    settings = runtime.settings
    assert settings.k == 6 and settings.k_control.name == "static"

    k2 = KNOBS["k"].window_runtime(runtime, 2.0).settings
    assert (k2.k, k2.k_control.name) == (2, "static")

    pid = KNOBS["k_controller"].window_runtime(runtime, "pid").settings
    assert pid.k_control.name == "pid" and pid.k == 6
    assert pid.k_control.params == type(pid.k_control.params)()  # the defaults
    same = KNOBS["k_controller"].window_runtime(runtime, "static").settings
    assert same.k_control == settings.k_control

    batch = KNOBS["max_batch"].window_runtime(runtime, 3.0).settings.scheduler.verify
    assert batch.limits.max_batch == 3
    assert batch.limits.max_wait_ms == settings.scheduler.verify.limits.max_wait_ms
    micro = KNOBS["max_microbatch"].window_runtime(runtime, 2.0).settings.scheduler.verify
    assert micro.microbatch is not None and micro.microbatch.max_microbatch == 2
    assert micro.limits == settings.scheduler.verify.limits

    assert settings.draft_selection is not None
    assert settings.draft_selection.name == "first"
    drafted = KNOBS["draft_model"].window_runtime(runtime, "draft-model").settings
    assert drafted.draft_selection is not None
    assert (drafted.draft_selection.name, drafted.draft_selection.params.model) == (
        "fixed",
        "draft-model",
    )


# -- (b) the planner chooses the known best and the run uses it ----------------------------


def test_k_collapsed_acceptance_the_planner_drafts_one_token(tmp_path):
    """Acceptance 0.02, 20 ms a drafted token, 30 ms a verify: k = 6 makes a round ~150 ms
    for about one token (TPOT SLO 100 ms missed), k = 1 ~50 ms. Started on 6, the planner
    chooses 1 at every round and the rounds after its first decision draft 1."""
    path = _write(tmp_path, candidates={"k": [1, 6]}, alpha=0.02, k=6, draft_ms=20.0)
    result, spans = _traced(_load(path))
    assert _chosen(result) == {"k=1"}
    assert {s.k for s in spans if s.start_s < INTERVAL_S - 1.0} == {6}
    # A round chosen before the decision may still be verified shortly after it.
    assert {s.k for s in spans if s.start_s > INTERVAL_S + 1.0} == {1}


def test_k_controller_the_adaptive_controller_beats_static_six(tmp_path):
    """Same collapsed case: acceptance_feedback (default parameters) backs k off to 1 within
    a few dozen rounds, static stays at 6; the planner chooses it and later rounds draft 1."""
    path = _write(
        tmp_path,
        candidates={"k_controller": ["static", "acceptance_feedback"]},
        alpha=0.02,
        k=6,
        draft_ms=20.0,
    )
    result, spans = _traced(_load(path))
    assert _chosen(result) == {"k_controller=acceptance_feedback"}
    assert {s.k for s in spans if s.start_s < INTERVAL_S - 1.0} == {6}
    assert {s.k for s in spans if s.start_s > 3 * INTERVAL_S} == {1}


def test_max_batch_the_planner_batches_an_overloaded_lane(tmp_path):
    """A verify costs 30 ms whatever the batch: at 20 requests/s one request per iteration
    is overloaded, 16 is not. Started on 1, the planner chooses 16 and later iterations batch."""
    path = _write(
        tmp_path,
        candidates={"max_batch": [1, 16]},
        rate_per_s=20.0,
        duration_s=20.0,
        edit=_set("scheduler.verify.batching.max_batch", 1),
    )
    result, spans = _traced(_load(path))
    assert _chosen(result) == {"max_batch=16"}
    assert max(len(s.requests) for s in spans if s.start_s < INTERVAL_S) == 1
    later = [len(s.requests) for s in spans if s.start_s >= INTERVAL_S]
    assert 1 < max(later) <= 16


def test_max_microbatch_the_planner_stops_splitting_batches(tmp_path):
    """A verify microbatch costs 30 ms whatever its size: microbatches of 1 make a batch of
    n cost n x 30 ms. Started on 1, the planner chooses 64 (the lane's max_batch) and later
    batches cost 30 ms."""
    path = _write(
        tmp_path,
        candidates={"max_microbatch": [1, 64]},
        rate_per_s=20.0,
        duration_s=20.0,
        edit=_set("scheduler.verify.microbatch.max_microbatch", 1),
    )
    result, spans = _traced(_load(path))
    assert _chosen(result) == {"max_microbatch=64"}
    before = [s for s in spans if s.start_s < INTERVAL_S and len(s.requests) > 1]
    after = [s for s in spans if s.start_s >= INTERVAL_S and len(s.requests) > 1]
    assert before and after
    assert all(s.duration_s == pytest.approx(0.030 * len(s.requests)) for s in before)
    assert all(s.duration_s == pytest.approx(0.030) for s in after)


def test_draft_model_the_planner_switches_to_the_fast_drafter(tmp_path):
    """The laptops list slow-draft (40 ms a token, first: the default) and draft-model
    (1 ms): with k = 4 the slow one misses the 100 ms TPOT SLO. The planner chooses the
    fast one; requests admitted after its first decision draft with it."""
    path = _write(
        tmp_path,
        candidates={"draft_model": ["slow-draft", "draft-model"]},
        edit=_two_drafters(tmp_path, ["slow-draft", "draft-model"]),
    )
    result = run(_load(path))
    assert _chosen(result) == {"draft_model=draft-model"}
    requests = result.requests
    early = requests[requests["arrival_s"] < INTERVAL_S - 0.5]
    late = requests[requests["arrival_s"] > INTERVAL_S + 0.5]
    assert set(early["draft_model"]) == {"slow-draft"}
    assert set(late["draft_model"]) == {"draft-model"}


def test_same_seed_gives_an_identical_planner_log_with_names_and_numbers(tmp_path):
    texts = []
    for sub in ("one", "two"):
        path = _write(
            tmp_path / sub,
            candidates={"k": [1, 4], "max_batch": [2, 16], "draft_model": ["slow-draft"]},
            rate_per_s=8.0,
            duration_s=12.0,
            edit=_two_drafters(tmp_path / sub, ["slow-draft", "draft-model"]),
        )
        paths = write_results(run(_load(path)), tmp_path / sub / "out")
        names = {p.name: p for p in paths}
        texts.append(names[PLANNER_LOG].read_text())
    assert texts[0] == texts[1]
    assert "k=1 max_batch=16 draft_model=slow-draft" in texts[0]


def test_hill_climbing_starts_from_the_runs_values(tmp_path):
    """Hill climbing's first round stands at the run's k and drafter model."""
    path = _write(
        tmp_path,
        candidates={"k": [1, 4, 6], "draft_model": ["draft-model", "slow-draft"]},
        k=4,
        duration_s=8.0,
        edit=lambda d: (
            _two_drafters(tmp_path, ["slow-draft", "draft-model"])(d),
            _set("planner.search", "hill_climb")(d),
        ),
    )
    log = run(_load(path)).planner_log
    first = log[log["time_s"] == log["time_s"].min()]["candidate"].tolist()
    # The current (k=4, and draft-model: the first listed, "first" is not a fixed model),
    # then one step down and up each list; last the run's own configuration (k=4 and its
    # drafter policy, which names no fixed model), windowed every round.
    assert first[0] == "k=4 draft_model=draft-model"
    assert first == [
        "k=4 draft_model=draft-model",
        "k=1 draft_model=draft-model",
        "k=6 draft_model=draft-model",
        "k=4 draft_model=slow-draft",
        "k=4",
    ]
    current = log[log["current"]]
    assert set(current["candidate"]) <= {"k=4", *first}
    assert Candidate((("k", 4.0),)).key == "k=4"


# -- (c) refusals -------------------------------------------------------------------------


def test_draft_model_candidates_must_be_listed_by_a_multi_model_class(tmp_path):
    path = _write(
        tmp_path,
        candidates={"draft_model": ["draft-model", "tiny"]},
        edit=_two_drafters(tmp_path, ["slow-draft", "draft-model"]),
    )
    _refused(
        path,
        "planner.candidates.draft_model",
        "['draft-model', 'tiny']",
        "drafter models listed by a draft class with several models: slow-draft, draft-model",
    )
    assert simulate_main([str(path), "-o", str(tmp_path / "out"), "--quiet"]) == 2
