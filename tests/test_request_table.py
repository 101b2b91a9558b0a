"""A run's request table is built once, even when the loader needs it to check the LUT lookups."""

from __future__ import annotations

import dataclasses

import pytest

import simulator.workload.run_requests as run_requests
from simulator.runner import run
from simulator.scenario import load_scenario
from tests.engine_fixtures import synthetic, write_scenario


@pytest.fixture
def generated(monkeypatch):
    """Count the request tables generated."""
    calls: list[int] = []
    real = run_requests.generate_requests

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_requests, "generate_requests", counting)
    return calls


def test_the_loaders_table_is_the_runs_under_lut_out_of_range_raise(tmp_path, generated):
    scenario = load_scenario(
        write_scenario(tmp_path, mode="none", workload=synthetic(20, 5.0, 200, 20))
    )
    assert scenario.simulation.lut_out_of_range == "raise"
    assert len(generated) == 1 and scenario.requests is not None
    result = run(scenario)
    assert len(generated) == 1
    assert len(result.requests) == len(scenario.requests) == 20


def test_without_the_check_the_run_builds_the_table(tmp_path, generated):
    path = write_scenario(tmp_path, mode="none", workload=synthetic(20, 5.0, 200, 20))
    scenario = load_scenario(path, overrides=["simulation.lut_out_of_range=clamp"])
    assert scenario.requests is None and not generated
    kept = run(load_scenario(path))
    built = run(scenario)
    assert len(generated) == 2
    assert built.requests.equals(kept.requests)


def test_the_kept_table_plays_no_part_in_equality(tmp_path):
    scenario = load_scenario(
        write_scenario(tmp_path, mode="none", workload=synthetic(5, 5.0, 200, 20))
    )
    assert dataclasses.replace(scenario, requests=None) == scenario
