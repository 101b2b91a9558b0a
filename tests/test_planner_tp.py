"""Tensor-parallel degrees as candidates of the online planner (``planner.candidates.tensor_parallel``).

A Llama-2-7B pool on the shipped A100 profiles (``a100-tp1.yaml``,
``a100-tp2.yaml``, ``a100-tp4.yaml``; the model's LUT has rows at tensor parallel 1, 2, 4 and
8): at 2 requests/s one TP-1 replica meets the SLOs with a quarter of the
GPUs, at 12 requests/s its decode steps are too slow for the 25 ms TPOT
target and a TP-4 replica meets it. The planner starts at TP 1 and moves
to TP 4 when the load rises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator import load_scenario, run
from simulator.cli import main as simulate_main
from simulator.engine.runtime import Runtime, build_runtime
from simulator.planner.analytic import estimate
from simulator.planner.candidates import Candidate, candidate_runtime
from simulator.planner.knobs import KNOBS
from simulator.validate import validate_file
from simulator.workload import DEFAULT_CLASS, RequestTable, SloTargets
from tests.test_planner import _trace

REPO = Path(__file__).resolve().parents[1]
POOL = "a100_pool"
SLO = {"ttft_ms": 1000.0, "tpot_ms": 25.0}
LOAD_S = 2.0
"""The planner's ``model_load_s``."""


def _write(
    tmp_path: Path,
    degrees: list[int] | None = None,
    phases: list[tuple[float, float]] | None = None,
    profile: str = "a100-tp1.yaml",
    replicas: int = 1,
    extra_candidates: dict[str, list[Any]] | None = None,
) -> Path:
    """One Llama-2-7B A100 pool (mode none); with ``degrees``, a planner choosing among them."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    # evenly spaced arrivals of 512-token prompts and 128-token outputs, phase after phase
    _trace(tmp_path / "trace.csv", phases or [(2.0, 30.0), (12.0, 40.0)], 512, 128)
    candidates: dict[str, list[Any]] = {**(extra_candidates or {})}
    if degrees is not None:
        candidates["tensor_parallel"] = degrees
    planner: dict[str, Any] = {}
    if candidates:
        planner = {
            "enabled": True,
            "interval_s": 10,
            "window_s": 20,
            "model_load_s": LOAD_S,
            "objectives": ["goodput", "p95_tpot"],
            "candidates": candidates,
        }
    document = {
        "scenario_id": "tp_planner",
        "seed": 1,
        "workload": {"source": "trace://trace.csv", "format": "csv", "slo": SLO},
        "hardware_profiles": [
            {
                "id": POOL,
                "type": "target",
                "profile": str(REPO / "device_profiles" / profile),
                "count": replicas,
            }
        ],
        "speculation": {
            "mode": "none",
            "verifier_models": [
                {"name": "llama-2-7b", "lut": str(REPO / "lut" / "llama-2-7b__a100-sxm4-80gb.csv")}
            ],
        },
        "simulation": {"lut_out_of_range": "clamp"},
        "planner": planner,
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _recent(rate_per_s: float, seconds: float, tpot_ms: float) -> RequestTable:
    count = int(rate_per_s * seconds)
    return RequestTable.from_columns(
        [i / rate_per_s for i in range(count)],
        [512] * count,
        [128] * count,
        slos={DEFAULT_CLASS: SloTargets(ttft_ms=SLO["ttft_ms"], tpot_ms=tpot_ms)},
    )


def _runtime(tmp_path: Path) -> Runtime:
    return build_runtime(load_scenario(_write(tmp_path, [1, 4])))


# -- loading: the plans of every degree ----------------------------------------------------


def test_the_runtime_carries_a_plan_per_pool_and_degree(tmp_path):
    """The TP-4 plan is the a100-tp4 profile's: 4 GPUs, four GPUs' memory, TP-4 LUT rows."""
    runtime = _runtime(tmp_path)
    plans = runtime.tensor_parallel_plans
    assert set(plans) == {(POOL, 1), (POOL, 4)}
    one, four = plans[(POOL, 1)], plans[(POOL, 4)]
    assert (one.gpus, one.tensor_parallel) == (1, 1)
    assert (four.gpus, four.tensor_parallel) == (4, 4)
    assert four.kv_capacity_mb > 4 * one.kv_capacity_mb * 0.9
    step_one, step_four = one.costs.step["decode"], four.costs.step["decode"]
    assert step_one is not None and step_four is not None
    assert step_four.key.tensor_parallel == 4
    # A TP-4 decode step of the Llama-2-7B LUT is faster than a TP-1 one.
    assert step_four.at(1024, 32)[0] < 0.7 * step_one.at(1024, 32)[0]
    assert runtime.replicas[0].tensor_parallel == 1


def test_without_tensor_parallel_candidates_no_other_plans(tmp_path):
    runtime = build_runtime(load_scenario(_write(tmp_path, None)))
    assert runtime.tensor_parallel_plans == {}


def test_an_unusable_degree_is_refused_naming_the_usable_ones(tmp_path):
    """Degree 8 has LUT rows but no A100 profile: refused, listing 1, 2 and 4 with their files."""
    path = _write(tmp_path, [1, 8])
    verdict = validate_file(path)
    assert verdict.error is not None
    lines = [issue.format() for issue in verdict.error.issues]
    text = "\n".join(lines)
    assert len(lines) == 1, text
    assert path.name in text
    assert "planner.candidates.tensor_parallel[1]" in text
    assert "1 (a100-tp1.yaml), 2 (a100-tp2.yaml), 4 (a100-tp4.yaml)" in text
    assert "no usable device profile and LUT at this tensor-parallel degree" in text
    assert simulate_main([str(path), "-o", str(tmp_path / "out"), "--quiet"]) == 2


def test_tensor_parallel_with_draft_replicas_is_refused(tmp_path):
    path = _write(tmp_path, [1, 4], extra_candidates={"draft_replicas": [0, 1]})
    verdict = validate_file(path)
    assert verdict.error is not None
    text = "\n".join(issue.format() for issue in verdict.error.issues)
    assert "tensor-parallel candidates with draft replicas" in text


def test_pools_starting_at_different_degrees_are_refused(tmp_path):
    path = _write(tmp_path, [1, 4])
    document = yaml.safe_load(path.read_text())
    other = dict(document["hardware_profiles"][0], id="big_pool")
    other["profile"] = str(REPO / "device_profiles" / "a100-tp4.yaml")
    document["hardware_profiles"].append(other)
    path.write_text(yaml.safe_dump(document))
    verdict = validate_file(path)
    assert verdict.error is not None
    text = "\n".join(issue.format() for issue in verdict.error.issues)
    assert "target pools at different tensor-parallel degrees" in text
    assert "a100_pool at 1, big_pool at 4" in text


# -- the knob ----------------------------------------------------------------------------


def test_the_window_runtime_of_a_degree_uses_its_plan(tmp_path):
    """TP 4: every replica gets the TP-4 plan (4 GPUs, TP-4 costs), keeping its availability."""
    runtime = _runtime(tmp_path)
    knob = KNOBS["tensor_parallel"]
    four = knob.window_runtime(runtime, 4.0)
    assert [p.tensor_parallel for p in four.replicas] == [4]
    assert four.replicas[0].gpus == 4
    assert four.replicas[0].costs is runtime.tensor_parallel_plans[(POOL, 4)].costs
    assert knob.window_runtime(runtime, 1.0).replicas == runtime.replicas
    # As a candidate's window: the replicas of the new degree load first.
    window = candidate_runtime(
        runtime, Candidate((("tensor_parallel", 4.0),)), {POOL: 2}, {POOL: [12.0, 12.0]}
    )
    assert [p.gpus for p in window.replicas] == [4, 4]
    assert all(not p.availability.is_available(11.0) for p in window.replicas)
    assert all(p.availability.is_available(12.5) for p in window.replicas)


def test_knobs_enumerate_tensor_parallel_after_the_replica_counts():
    names = list(KNOBS)
    assert names.index("verify_replicas") < names.index("tensor_parallel") < names.index("k")


def test_a_window_of_tp_4_is_priced_with_tp_4_costs(tmp_path):
    """The analytic estimate at 0.5 requests/s (one sequence decoding at a time) with an 8 ms
    TPOT target: a TP-1 decode step of the LUT (about 10 ms) misses it, a TP-4 one (about
    5.6 ms) meets it, so only the TP-4 window is predicted to serve the requests well."""
    runtime = _runtime(tmp_path)
    recent = _recent(0.5, 20.0, tpot_ms=8.0)
    one = estimate(runtime, recent, 20.0, 0.0)
    four = estimate(KNOBS["tensor_parallel"].window_runtime(runtime, 4.0), recent, 20.0, 0.0)
    assert one.worst_ratio > 1.0 > four.worst_ratio
    assert one.goodput == 0.0
    assert four.goodput == pytest.approx(0.5 / 4)


# -- a run ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = _write(tmp_path_factory.mktemp("planned"), [1, 4])
    return run(load_scenario(path))


def test_the_planner_moves_to_tp_4_when_the_load_rises(planned):
    """At 2 requests/s TP 1 is kept; after the rise to 12 it changes to TP 4 and keeps it."""
    log = planned.planner_log
    chosen = log[log["chosen"]].set_index("time_s")
    assert (chosen.loc[chosen.index < 30, "candidate"] == "tensor_parallel=1").all()
    changed = chosen[chosen["decision"] == "changed"]
    assert list(changed["candidate"]) == ["tensor_parallel=4"]
    at_s = float(changed.index[0])
    assert 30 < at_s <= 50
    assert (chosen.loc[chosen.index > at_s, "candidate"] == "tensor_parallel=4").all()
    assert KNOBS["tensor_parallel"].name == "tensor_parallel"


def test_the_old_degree_drains_and_the_new_holds_its_gpus_from_the_decision(planned):
    """The TP-1 replica retires after the change; the TP-4 one holds 4 GPUs from the decision,
    and GPU-hours count 1 GPU until the retirement plus 4 from the decision."""
    log = planned.planner_log
    at_s = float(log[log["decision"] == "changed"]["time_s"].iloc[0])
    output = planned.output
    assert output.replica_gpus == (1, 4)
    (on_old, off_old), (on_new, off_new) = output.replica_spans_s
    assert on_old == 0.0 and at_s <= off_old < output.simulated_s
    assert on_new == at_s and off_new == output.simulated_s
    gpu_s = 1 * (off_old - on_old) + 4 * (off_new - on_new)
    assert planned.summary["resources"]["gpu_hours"] == pytest.approx(gpu_s / 3600.0)
    # The pool's held time and price count the TP-4 replica as four TP-1 replicas.
    usage = next(u for u in output.device_classes if u.id == POOL)
    assert usage.held_unit_s == pytest.approx(gpu_s)
    assert output.replica_usd_per_hour[1] == pytest.approx(4 * output.replica_usd_per_hour[0])
    ts = planned.timeseries
    assert {"loading", "serving", "retired"} <= set(ts["state"])


def test_the_knobs_current_value_follows_the_change(tmp_path):
    """``current`` is the degree of the replicas the pool serves with: 1, then 4 once changed."""
    from simulator.engine.core import Engine

    seen: list[float] = []
    original = Engine.set_replica_plan

    def spy(self: Engine, pool: str, plan: Any, count: int, load_s: float) -> None:
        seen.append(float(KNOBS["tensor_parallel"].current(self)))
        original(self, pool, plan, count, load_s)
        seen.append(float(KNOBS["tensor_parallel"].current(self)))
        assert [r.plan.tensor_parallel for r in self.active_replicas(pool)] == [4] * count

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Engine, "set_replica_plan", spy)
        run(load_scenario(_write(tmp_path, [1, 4])))
    assert seen == [1.0, 4.0]


@pytest.mark.slow
def test_verify_replicas_and_tensor_parallel_act_together(tmp_path):
    """With both keys a change sets the count and the degree: at 20 requests/s the planner
    goes from one TP-1 replica to one TP-4 replica, then adds a second TP-4 replica (a
    count change at the new degree starts replicas of that degree), then drains it."""
    path = _write(
        tmp_path,
        [1, 4],
        phases=[(2.0, 30.0), (20.0, 30.0)],
        extra_candidates={"verify_replicas": [1, 2]},
    )
    result = run(load_scenario(path))
    log = result.planner_log
    changed = log[log["chosen"] & (log["decision"] == "changed")].set_index("time_s")
    assert changed["candidate"].to_dict() == {
        40.0: "verify_replicas=1 tensor_parallel=4",
        50.0: "verify_replicas=2 tensor_parallel=4",
        60.0: "verify_replicas=1 tensor_parallel=4",
    }
    output = result.output
    assert output.replica_gpus == (1, 4, 4)
    assert [on for on, _ in output.replica_spans_s] == [0.0, 40.0, 50.0]
    assert 40.0 < output.replica_spans_s[0][1] < output.simulated_s  # drained, then retired


def test_a_reload_charges_the_loading_of_every_gpu_of_the_new_degree():
    """1 replica at TP 1 -> 1 at TP 4 loads 4 GPUs (not the 3 the change adds); a count change
    loads only what it adds."""
    from types import SimpleNamespace

    from simulator.planner.online import _loading_gpus

    engine = SimpleNamespace(serving_counts=lambda: {"a100": 1}, tensor_parallel=lambda _: 1)

    def task(*gpus: int) -> Any:
        plans = tuple(SimpleNamespace(pool="a100", gpus=g) for g in gpus)
        return SimpleNamespace(runtime=SimpleNamespace(replicas=plans))

    reload = Candidate((("tensor_parallel", 4.0),))
    assert _loading_gpus(engine, reload, task(4), task(1)) == 4
    grow = Candidate((("verify_replicas", 3.0),))
    assert _loading_gpus(engine, grow, task(1, 1, 1), task(1)) == 2
    assert _loading_gpus(engine, Candidate((("verify_replicas", 1.0),)), task(1), task(1, 1)) == 0
