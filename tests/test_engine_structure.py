"""The engine's structure: no import circles, and runs built from runtime objects alone."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from simulator import load_scenario
from simulator.engine.core import Engine
from simulator.engine.runtime import build_runtime
from simulator.rng import RandomStreams
from simulator.runner import build_requests
from tests.engine_fixtures import synthetic, write_scenario

PACKAGE = Path(__file__).resolve().parent.parent / "simulator"


def _imports(path: Path) -> set[str]:
    """Every ``simulator.*`` module a file imports, type-checking-only imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("simulator"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("simulator"))
    return found


def _module_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        graph[name] = _imports(path)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_engine_modules_import_no_circle():
    graph = {
        name: {m for m in deps if m.startswith("simulator.engine")}
        for name, deps in _module_graph().items()
        if name.startswith("simulator.engine")
    }
    assert _cycle(graph) is None, _cycle(graph)


def test_servers_and_collaborators_do_not_know_the_engine():
    graph = _module_graph()
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
    graph = _module_graph()
    for server in ("target", "draft_device"):
        deps = graph[f"simulator.engine.{server}"]
        for room in ("speculation", "flow", "dispatcher", "fleet", "binding"):
            assert f"simulator.engine.{room}" not in deps, (server, room)


def test_metrics_and_the_planner_log_read_records_not_the_kernel():
    for name, deps in _module_graph().items():
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
