"""The recent-history window a replica keeps for adaptive k controllers."""

from __future__ import annotations

import math

import pytest

from simulator.engine.signals import ReplicaWindow


def test_replica_window_keeps_the_last_iterations_and_rounds():
    window = ReplicaWindow(20)
    assert math.isnan(window.p95_ms())
    assert math.isnan(window.acceptance())
    for ms in range(1, 41):  # only 21..40 remain
        window.add_iteration(ms / 1000.0)
    assert window.p95_ms() == pytest.approx(39.0)
    window.add_iteration(0.1)
    assert window.p95_ms() == pytest.approx(40.0)  # 22..40 and 100: the 19th of 20
    for _ in range(20):
        window.add_round(0, 4)
    for _ in range(10):
        window.add_round(4, 4)
    assert window.acceptance() == pytest.approx(0.5)


def test_replica_window_averages_the_last_queue_waits():
    window = ReplicaWindow(4)
    assert math.isnan(window.wait_ms())
    window.add_waits([0.010, 0.020])
    assert window.wait_ms() == pytest.approx(15.0)
    window.add_waits([0.0, 0.0, 0.0])  # the 10 ms wait falls out of the window
    assert window.wait_ms() == pytest.approx(5.0)
