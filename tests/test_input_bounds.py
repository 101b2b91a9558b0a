"""Every input that could make a run, a search or a read unbounded is bounded before work starts.

Each case of the kind that used to run into a minute of CPU or gigabytes of
memory is here scaled down: the test shows the bound is checked before any
run (exit 2 and one message naming the file or option, the key, the value
and what is allowed) or that the work stops early (a trace read stops at
``workload.max_requests``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from simulator.cli import main as simulate_main
from simulator.limits import MIN_SEARCH_TOLERANCE
from simulator.sweeps import search
from tests.engine_fixtures import synthetic, write_scenario


def _fail_if_run(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("a run started")


# -- capacity search -----------------------------------------------------------
def test_capacity_refuses_a_tolerance_below_the_floor_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 100, 10))
    monkeypatch.setattr(search, "run", _fail_if_run)
    code = simulate_main(
        ["capacity", str(path), "--slo-attainment", "0.9", "--tolerance", "1e-300"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--tolerance" in err and "1e-300" in err and f">= {MIN_SEARCH_TOLERANCE:g}" in err


def test_capacity_bisection_stops_after_a_bounded_number_of_probes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Even if the tolerance were never reached, the bisection stops after its step cap."""

    def load(_file: Any, overrides: list[str], seed: Any) -> Any:
        return SimpleNamespace(scale=float(overrides[-1].split("=")[1]))

    def run(scenario: Any) -> Any:
        passed = scenario.scale < 1.0
        requests = {"measured": 10}
        return SimpleNamespace(
            summary={
                "goodput": {"slo_attainment": 1.0 if passed else 0.0},
                "requests": requests,
                "measured_s": 1.0,
            }
        )

    monkeypatch.setattr(search, "load_scenario", load)
    monkeypatch.setattr(search, "run", run)
    monkeypatch.setattr(search, "target_gpus", lambda _s: 1)
    monkeypatch.setattr(search, "MAX_BISECTION_STEPS", 5)
    found = search.capacity("x.yaml", 0.9, low=0.1, high=10.0, tolerance=MIN_SEARCH_TOLERANCE)
    assert len(found.probes) == 2 + 5
    assert found.best is not None and found.best.arrival_scale < 1.0
