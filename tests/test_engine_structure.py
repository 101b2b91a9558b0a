"""The engine's structure: no import circles, and runs built from runtime objects alone."""

from __future__ import annotations

import dataclasses

from simulator import load_scenario
from simulator.engine.core import Engine
from simulator.engine.runtime import build_runtime
from simulator.rng import RandomStreams
from simulator.runner import build_requests
from tests.engine_fixtures import synthetic, write_scenario
from tests.import_graph import PACKAGE, cycle, module_graph


def test_engine_modules_import_no_circle():
    graph = {
        name: {m for m in deps if m.startswith("simulator.engine")}
        for name, deps in module_graph().items()
        if name.startswith("simulator.engine")
    }
    assert cycle(graph) is None, cycle(graph)


def test_servers_and_collaborators_do_not_know_the_engine():
    graph = module_graph()
    for module in (
        "target",
        "draft_device",
        "timeseries",
        "closed_loop",
        "lifecycle",
        "records",
        "binding",
        "speculation",
        "fleet",
        "flow",
        "dispatcher",
        "what_if",
    ):
        assert "simulator.engine.core" not in graph[f"simulator.engine.{module}"], module


def test_servers_reach_the_collaborators_only_through_their_context():
    graph = module_graph()
    for server in ("target", "draft_device"):
        deps = graph[f"simulator.engine.{server}"]
        for room in ("speculation", "flow", "dispatcher", "fleet", "binding"):
            assert f"simulator.engine.{room}" not in deps, (server, room)


def test_metrics_and_the_planner_log_read_records_not_the_kernel():
    for name, deps in module_graph().items():
        if name.startswith("simulator.metrics") or name in (
            "simulator.planner.log",
            "simulator.planner.objectives",
        ):
            assert "simulator.engine.core" not in deps, name


def test_the_kernel_stays_small():
    lines = (PACKAGE / "engine" / "core.py").read_text(encoding="utf-8").count("\n")
    assert lines < 500, lines


def test_the_engine_never_looks_at_the_scenario():
    for module in ("core", "dispatcher", "fleet", "flow", "speculation", "what_if", "binding"):
        source = (PACKAGE / "engine" / f"{module}.py").read_text(encoding="utf-8")
        assert "Scenario" not in source.replace("SchedulerSpec", ""), module
        assert "self.scenario" not in source, module
    core = (PACKAGE / "engine" / "core.py").read_text(encoding="utf-8")
    assert "simulator.scenario.model import LaneSpec, PolicyChoice" in core  # value types


def test_a_candidate_configuration_runs_from_edited_runtime_objects(tmp_path):
    """A what-if window can drop a replica without any scenario file."""
    path = write_scenario(tmp_path, mode="none", workload=synthetic(40, 50.0, 200, 20), replicas=3)
    scenario = load_scenario(path)
    runtime = build_runtime(scenario)
    table = build_requests(scenario)
    smaller = dataclasses.replace(runtime, replicas=runtime.replicas[:1])
    full = Engine(runtime, table, RandomStreams(scenario.seed)).run()
    one = Engine(smaller, table, RandomStreams(scenario.seed)).run()
    assert {r.replica for r in full.records} == {0, 1, 2}
    assert {r.replica for r in one.records} == {0}
    assert all(r.outcome == "completed" for r in one.records)
    assert len(one.replica_busy_s) == 1
