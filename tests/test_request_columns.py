"""A run's records held as columns: the same values as one record object per request."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
import pytest

from simulator import load_scenario
from simulator.engine.records import REQUEST_COLUMNS, RequestColumns
from simulator.engine.request_state import record_columns, to_record
from simulator.runner import request_frame, snapshot
from tests.golden.runs import EXAMPLES, TEST_SIZE


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hybrid_mix", "none_baseline"])
def test_columns_hold_exactly_the_records_of_the_states(name):
    scenario = load_scenario(EXAMPLES / f"{name}.yaml", overrides=TEST_SIZE[name])
    # Stopped part-way: completed, unfinished (and rejected) requests side by side.
    state = snapshot(scenario, 10.0)
    engine = state.engine
    states = engine._states[: engine._arrived] + engine._in_flight_states
    expected = [repr(astuple(to_record(s))) for s in states]
    columns = record_columns(list(states))
    assert [repr(astuple(r)) for r in columns.records()] == expected
    consumed = list(states)
    assert [repr(astuple(r)) for r in record_columns(consumed, consume=True).records()] == expected
    assert consumed == []


def test_an_empty_run_has_no_records_and_an_empty_table():
    columns = record_columns([])
    assert len(columns) == 0
    assert columns.records() == ()
    assert list(request_frame(RequestColumns()).columns) == list(REQUEST_COLUMNS)


def test_the_table_is_sorted_by_request_id_when_requests_arrive_out_of_order():
    columns = {name: np.zeros(3, dtype=np.int64) for name in REQUEST_COLUMNS}
    columns["request_id"] = np.array([2, 0, 1])
    columns["prompt_tokens"] = np.array([20, 0, 10])
    frame = request_frame(RequestColumns(columns))
    assert frame["request_id"].tolist() == [0, 1, 2]
    assert frame["prompt_tokens"].tolist() == [0, 10, 20]
    assert list(frame.index) == [0, 1, 2]
