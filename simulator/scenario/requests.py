"""The requests a run of a scenario replays, built once and checked against the planner's bounds.

:func:`checked_requests` builds the table
(:func:`simulator.workload.run_requests.build_requests`) and refuses a
planner that would run more what-if windows over its arrivals than a run may
(:func:`~simulator.scenario.planner_bounds.planner_window_issues`). The
loader calls it when ``simulation.lut_out_of_range: raise`` needs the table
to check the LUT lookups, and keeps the table on the scenario
(:attr:`Scenario.requests`); :func:`run_requests` gives a run that table, or
builds it when the loader did not.
"""

from __future__ import annotations

import numpy as np

from simulator.errors import InputError
from simulator.scenario.model import Scenario
from simulator.scenario.planner_bounds import planner_window_issues
from simulator.workload import RequestTable
from simulator.workload.run_requests import build_requests


def checked_requests(scenario: Scenario) -> RequestTable:
    """Generate the scenario's request table from its workload and seed, and bound its planner.

    Raises:
        InputError: See :func:`~simulator.workload.run_requests.build_requests`;
            or the planner would run more what-if windows
            (:data:`simulator.limits.MAX_PLANNER_WINDOWS`) over the arrivals.
    """
    table = build_requests(scenario)
    if len(table):
        until_s = scenario.simulation.until_s
        last_s = float(np.max(table.arrival_s))
        issues = planner_window_issues(scenario.source_file, scenario.planner, last_s, until_s)
        if issues:
            raise InputError(issues)
    return table


def run_requests(scenario: Scenario) -> RequestTable:
    """The request table a run of ``scenario`` replays: the loader's, else built now.

    Raises:
        InputError: See :func:`checked_requests`.
    """
    if scenario.requests is not None:
        return scenario.requests
    return checked_requests(scenario)
