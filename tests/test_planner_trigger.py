"""When a planning round runs its windows (the re-plan trigger) and what it replays (the forecast)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator import run
from simulator.errors import InputError
from simulator.planner.forecast import Load, busiest_start_s, forecast, load_of
from simulator.planner.trigger import (
    NOISE_SIGMAS,
    Windowed,
    attainment_change,
    load_change,
    replan_reason,
)
from simulator.workload import DEFAULT_CLASS, RequestTable, SloTargets
from tests.test_planner import _planner, _scenario


def _table(arrival_s: list[float], tokens: list[int]) -> RequestTable:
    n = len(arrival_s)
    return RequestTable(
        arrival_s=np.asarray(arrival_s, dtype=float),
        prompt_tokens=np.asarray(tokens),
        output_tokens=np.ones(n, dtype=int),
        slo_class=np.array([DEFAULT_CLASS] * n),
        origin=np.array([""] * n),
        category=np.array([""] * n),
        slos={DEFAULT_CLASS: SloTargets(ttft_ms=1000.0, tpot_ms=100.0)},
    )


def test_the_default_history_replays_the_last_window_shifted_to_now():
    table = _table([1.0, 12.0, 15.0, 19.5], [10, 20, 30, 40])
    out = forecast(table, at_s=20.0, start_s=0.0, window_s=10.0, history_s=10.0)
    assert out.arrival_s.tolist() == [22.0, 25.0, 29.5]
    assert out.prompt_tokens.tolist() == [20, 30, 40]
    assert out.first_id == len(table)  # ids after the run's


def test_early_in_the_run_the_seconds_there_repeat_to_fill_the_window():
    table = _table([1.0, 3.0], [10, 20])
    out = forecast(table, at_s=4.0, start_s=0.0, window_s=10.0, history_s=60.0)
    assert out.arrival_s.tolist() == [5.0, 7.0, 9.0, 11.0, 13.0]
    assert out.prompt_tokens.tolist() == [10, 20, 10, 20, 10]


def test_a_longer_history_replays_its_busiest_window_by_tokens():
    # a burst of tokens at 30-35 s, a quiet last window (50-60 s)
    table = _table([5.0, 31.0, 32.0, 34.0, 52.0, 55.0], [100, 900, 900, 900, 100, 100])
    assert busiest_start_s(table, 0.0, 60.0, 10.0) == 31.0
    out = forecast(table, at_s=60.0, start_s=0.0, window_s=10.0, history_s=60.0)
    assert out.arrival_s.tolist() == [60.0, 61.0, 63.0]
    assert out.prompt_tokens.tolist() == [900, 900, 900]
    # the burst out of the history: back to the last window's
    out = forecast(table, at_s=60.0, start_s=0.0, window_s=10.0, history_s=20.0)
    assert out.prompt_tokens.tolist() == [100, 100]


def test_equal_spans_the_latest_wins():
    table = _table([1.0, 21.0], [5, 5])
    assert busiest_start_s(table, 0.0, 30.0, 10.0) == 20.0  # the last span, 20-30 s


def test_load_is_tokens_and_their_squares():
    load = load_of(_table([0.0, 1.0], [3, 5]))
    assert load == Load(2, 4.0 + 6.0, 16.0 + 36.0)
    assert load_of(_table([0.0], [3]), backlog=7).backlog == 7


def _windowed(tokens: float, attainment: float = 0.95, climbing: bool = False) -> Windowed:
    return Windowed(30.0, Load(100, tokens, tokens * 100.0), attainment, climbing)


def test_a_steady_load_keeps_without_windows():
    run_it, why = replan_reason(0.1, _windowed(10_000.0), Load(100, 10_500.0, 1.05e6), 40, 0.94, 20)
    assert not run_it
    assert why.startswith("load as before: tokens +5.0 %")


def test_drift_zero_first_round_and_a_climb_under_way_always_window():
    steady = Load(100, 10_000.0, 1e6)
    assert replan_reason(0.0, _windowed(10_000.0), steady, 0, math.nan, 20) == (
        True,
        "every round (replan_drift 0)",
    )
    assert replan_reason(0.1, None, steady, 0, math.nan, 20) == (True, "first windows")
    assert replan_reason(0.1, _windowed(10_000.0, climbing=True), steady, 0, math.nan, 20)[0]


def test_a_load_change_must_exceed_both_the_drift_and_the_noise():
    then = _windowed(10_000.0)  # 100 requests of 100 tokens
    # +30 %, with squares of 100-token requests: sd = sqrt(1.3e6 + 1e6) = 1517, 3000 / 1517 = 1.98
    noisy = Load(130, 13_000.0, 1.3e6)
    assert load_change(noisy, then.load)[1] < NOISE_SIGMAS
    assert not replan_reason(0.1, then, noisy, 0, math.nan, 20)[0]
    clear = Load(150, 15_000.0, 1.5e6)  # 5000 / 1581 = 3.2 sd
    run_it, why = replan_reason(0.1, then, clear, 0, math.nan, 20)
    assert run_it and why.startswith("load moved: tokens +50.0 %")
    assert not replan_reason(0.6, then, clear, 0, math.nan, 20)[0]  # within a 60 % drift


def test_an_estimate_missed_by_more_than_the_drift_windows_again():
    then = _windowed(10_000.0, attainment=0.95)
    steady = Load(100, 10_000.0, 1e6)
    run_it, why = replan_reason(0.1, then, steady, 40, 0.80, 20)
    assert run_it and why.startswith("estimate missed: attainment 0.800")
    assert not replan_reason(0.1, then, steady, 40, 0.86, 20)[0]  # within the drift
    assert not replan_reason(0.1, then, steady, 10, 0.50, 20)[0]  # too few completions


def test_an_estimate_missed_within_its_sampling_noise_keeps():
    # 0.60 estimated over a window of 20 requests, 0.45 seen over 20 completions: the pooled
    # share 0.525 gives a deviation sqrt(0.525 * 0.475 * (1/20 + 1/20)) = 0.158, and the miss
    # of 0.15 is 0.95 of it; with 400 requests on each side the same miss is 4.2 deviations.
    small = Windowed(30.0, Load(20, 1_000.0, 5e4), 0.60, False)
    load = Load(20, 1_000.0, 5e4)
    assert attainment_change(0.45, 20, small) == pytest.approx(
        0.15 / math.sqrt(0.525 * 0.475 * 0.1)
    )
    assert not replan_reason(0.1, small, load, 20, 0.45, 20)[0]
    busy = Load(300, 1_000.0, 5e4, backlog=100)
    run_it, why = replan_reason(0.1, Windowed(30.0, busy, 0.60, False), busy, 400, 0.45, 20)
    assert run_it and why.endswith("(4.2 sd)")


@pytest.mark.slow
def test_steady_rounds_keep_without_windows_and_a_step_windows_again(tmp_path):
    """Steady 6/s: after the first round, rounds whose load is as before run no window; a step
    to 12/s at 60 s makes the round after it run windows (the tokens doubled)."""
    planner = {**_planner(10), "candidates": {"verify_replicas": [2, 4, 8]}}
    steady = run(_scenario(tmp_path / "s", [(6, 60)], 2, planner)).planner_log
    per_round = steady.groupby("time_s")["est_goodput"].count()
    assert per_round[10.0] == 3
    kept = steady.groupby("time_s")["replan"].first().str.startswith("load as before")
    assert kept.sum() >= 2
    assert (per_round[kept] == 0).all()
    step = run(_scenario(tmp_path / "t", [(6, 60), (12, 60)], 2, planner)).planner_log
    replans = step.groupby("time_s")["replan"].first()
    assert replans.loc[70.0].startswith("load moved: tokens +100.0 %")
    every = run(_scenario(tmp_path / "e", [(6, 60)], 2, {**planner, "replan_drift": 0}))
    assert (every.planner_log.groupby("time_s")["est_goodput"].count() == 3).all()


def test_a_backlog_that_drained_or_grew_windows_again():
    then = Windowed(30.0, Load(100, 10_000.0, 1e6, backlog=33), 0.95, False)
    run_it, why = replan_reason(0.1, then, Load(100, 10_000.0, 1e6, backlog=2), 40, 0.95, 20)
    assert run_it and "unfinished -93.9 %" in why
    assert not replan_reason(0.1, then, Load(100, 10_000.0, 1e6, backlog=28), 40, 0.95, 20)[0]


def test_a_history_shorter_than_the_window_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"planner\.history_s.*at least planner\.window_s \(10\)"):
        _scenario(tmp_path, [(6, 20)], 2, {**_planner(10), "history_s": 5})


@pytest.mark.slow
def test_a_longer_history_replays_the_recent_burst_in_a_run(tmp_path):
    """A 10 s burst at 12/s in a 4/s run: with a 40 s history the rounds until the burst leaves
    the history replay it (12/s); with the default they replay the last 10 s (4/s)."""
    planner = {**_planner(10), "candidates": {"verify_replicas": [2, 4, 8]}, "replan_drift": 0}
    phases = [(4, 30), (12, 10), (4, 40)]
    last = run(_scenario(tmp_path / "l", phases, 2, planner)).planner_log
    peak = run(_scenario(tmp_path / "p", phases, 2, {**planner, "history_s": 40})).planner_log
    rate_last = last.groupby("time_s")["forecast_arrival_rate_per_s"].first()
    rate_peak = peak.groupby("time_s")["forecast_arrival_rate_per_s"].first()
    assert rate_last.loc[40.0] == rate_peak.loc[40.0] == 12.0
    assert (rate_last.loc[50.0:80.0] == 4.0).all()
    assert (rate_peak.loc[50.0:70.0] == 12.0).all()
    assert rate_peak.loc[80.0] == 4.0  # the burst (30-40 s) left the history (40-80 s)
