"""Closed-loop workloads: users sending their next request when the previous one ends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator import load_scenario, run
from simulator.errors import InputError
from simulator.workload import check_workload_section
from simulator.workload.closed_loop import ClosedLoop, ExponentialThinkTime, FixedThinkTime
from tests.engine_fixtures import synthetic, write_scenario

MODES = ("none", "distributed", "fused")


def closed(num_requests: int, users: int, think: object = 0, **lengths: int) -> dict:
    """A synthetic closed-loop workload with fixed lengths."""
    workload = synthetic(num_requests, 1.0, lengths.get("prompt", 200), lengths.get("output", 30))
    del workload["synthetic"]["arrival"]
    workload["closed_loop"] = {"users": users, "think_time_s": think}
    return workload


def _run(tmp_path: Path, workload: dict, mode: str = "none", **kw: object):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = write_scenario(tmp_path, mode=mode, workload=workload, **kw)  # type: ignore[arg-type]
    return run(load_scenario(path))


def _ends_s(frame: pd.DataFrame) -> np.ndarray:
    """End time of each completed request (last token at the client)."""
    done = frame[frame["outcome"] == "completed"]
    return np.sort((done["arrival_s"] + done["e2e_ms"] / 1000.0).to_numpy())


def _max_in_flight(frame: pd.DataFrame) -> int:
    ends = frame["arrival_s"] + frame["e2e_ms"].fillna(0.0) / 1000.0
    events = sorted(
        [(t, 0) for t in ends] + [(t, 1) for t in frame["arrival_s"]]
    )  # an end at t comes before a start at t
    level = peak = 0
    for _, starts in events:
        level += 1 if starts else -1
        peak = max(peak, level)
    return peak


# -- the workload section ------------------------------------------------------
def test_closed_loop_section_builds_users_and_think_time(tmp_path):
    spec, issues = check_workload_section(closed(10, 3, 0.5), tmp_path / "s.yaml")
    assert not issues
    assert spec is not None and spec.closed_loop == ClosedLoop(3, FixedThinkTime(0.5))
    spec, issues = check_workload_section(
        closed(10, 2, {"dist": "exponential", "mean_s": 2}), tmp_path / "s.yaml"
    )
    assert not issues
    assert spec is not None and spec.closed_loop == ClosedLoop(2, ExponentialThinkTime(2.0))
    plain = synthetic(10, 1.0, 200, 30)
    spec, _ = check_workload_section(plain, tmp_path / "s.yaml")
    assert spec is not None and spec.closed_loop is None


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        (lambda w: w.update(arrival_scale=2.0), "workload.arrival_scale", "would be ignored"),
        (
            lambda w: w["synthetic"].update(arrival={"process": "poisson", "rate_per_s": 3}),
            "workload.synthetic.arrival",
            "would be ignored",
        ),
        (
            lambda w: (w["synthetic"].pop("num_requests"), w["synthetic"].update(duration_s=5)),
            "workload.synthetic.duration_s",
            "simulation.until_s",
        ),
        (lambda w: w.pop("closed_loop"), "workload.synthetic.arrival", "needs an arrival process"),
        (lambda w: w["closed_loop"].update(users=0), "workload.closed_loop.users", ""),
        (
            lambda w: w["closed_loop"].update(think_time_s=-1),
            "workload.closed_loop.think_time_s",
            "",
        ),
        (
            lambda w: w["closed_loop"].update(think_time_s={"dist": "exponential", "mean_s": 0}),
            "workload.closed_loop.think_time_s",
            "",
        ),
    ],
)
def test_closed_loop_refuses_what_it_would_ignore(tmp_path, change, key, words):
    workload = closed(10, 2)
    change(workload)
    spec, issues = check_workload_section(workload, tmp_path / "s.yaml")
    assert spec is None
    matching = [i for i in issues if i.key_path.startswith(key)]
    assert matching, issues
    assert words in str(matching[0])


def test_closed_loop_refusal_names_the_scenario_file(tmp_path):
    workload = closed(10, 2)
    workload["arrival_scale"] = 2.0
    with pytest.raises(InputError) as caught:
        _run(tmp_path, workload)
    assert "scenario.yaml: workload.arrival_scale" in str(caught.value)


# -- the engine ------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_never_more_than_users_in_flight(tmp_path, mode):
    users = 4
    result = _run(tmp_path, closed(30, users, {"dist": "exponential", "mean_s": 0.05}), mode)
    frame = result.requests
    assert (frame["outcome"] == "completed").all()
    assert len(frame) == 30
    assert _max_in_flight(frame) == users
    assert (frame["arrival_s"].iloc[:users] == 0.0).all()


def test_zero_think_time_sends_the_next_request_when_one_ends(tmp_path):
    users, n = 3, 20
    frame = _run(tmp_path, closed(n, users, 0, prompt=100, output=5)).requests
    ends = _ends_s(frame)
    # The k-th request sent after the first wave goes out at the k-th end.
    np.testing.assert_array_equal(frame["arrival_s"].to_numpy()[users:], ends[: n - users])
    assert frame["arrival_s"].is_monotonic_increasing


def test_fixed_think_time_shifts_the_next_request_exactly(tmp_path):
    users, n, think = 3, 20, 0.25
    frame = _run(tmp_path, closed(n, users, think, prompt=100, output=5)).requests
    ends = _ends_s(frame)
    np.testing.assert_allclose(
        frame["arrival_s"].to_numpy()[users:], ends[: n - users] + think, rtol=0, atol=1e-12
    )


def test_rejected_requests_end_too(tmp_path):
    """A request rejected on arrival frees its user at once (context window here)."""
    trace = tmp_path / "trace.csv"
    rows = ["arrival_s,prompt_tokens,output_tokens"]
    rows += [f"{i * 100},{500_000 if i % 2 else 100},5" for i in range(10)]
    trace.write_text("\n".join(rows) + "\n")
    workload = {
        "source": "trace://trace.csv",
        "slo": {"ttft_ms": 1000, "tpot_ms": 100},
        "closed_loop": {"users": 1, "think_time_s": 0.5},
    }
    frame = _run(tmp_path, workload).requests
    assert list(frame["outcome"]) == ["completed", "rejected"] * 5
    assert list(frame["prompt_tokens"]) == [100, 500_000] * 5  # table order
    arrivals = frame["arrival_s"].to_numpy()
    ends = np.where(frame["outcome"] == "completed", arrivals + frame["e2e_ms"] / 1000.0, arrivals)
    np.testing.assert_allclose(arrivals[1:], ends[:-1] + 0.5, rtol=0, atol=1e-12)
    assert arrivals[-1] < 100  # the trace's arrival times are not used


def test_until_s_ends_a_closed_loop_and_reports_only_what_was_sent(tmp_path):
    result = _run(tmp_path, closed(1000, 2, 0, output=50), extra={"simulation.until_s": 2.0})
    frame = result.requests
    assert 2 < len(frame) < 1000
    assert result.summary["simulated_s"] == 2.0
    assert (frame["outcome"] == "unfinished").sum() <= 2


def test_same_seed_same_outputs_and_the_think_stream_matters(tmp_path):
    workload = closed(25, 3, {"dist": "exponential", "mean_s": 0.1})
    first = _run(tmp_path / "a", workload, "distributed")
    again = _run(tmp_path / "b", workload, "distributed")
    pd.testing.assert_frame_equal(first.requests, again.requests)
    assert first.summary == again.summary
    other = _run(tmp_path / "c", workload, "distributed", extra={"seed": 2})
    assert not np.array_equal(other.requests["arrival_s"], first.requests["arrival_s"])
