"""Every input that could make a run, a search or a read unbounded is bounded before work starts.

Each case of the kind that used to run into a minute of CPU or gigabytes of
memory is here scaled down: the test shows the bound is checked before any
run (exit 2 and one message naming the file or option, the key, the value
and what is allowed) or that the work stops early (a trace read stops at
``workload.max_requests``).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simulator import load_scenario, run
from simulator.cli import main as simulate_main
from simulator.cli_support import run_guarded
from simulator.errors import EXIT_NON_FINITE_RESULT, InputError, NonFiniteResult
from simulator.limits import MIN_SEARCH_TOLERANCE
from simulator.metrics import summary as summary_module
from simulator.outputs import write_results
from simulator.planner.candidates import enumerate_candidates
from simulator.scenario import planner_bounds
from simulator.sweeps import search
from simulator.sweeps.plan_space import load_plan_space
from simulator.sweeps.spec import load_sweep
from simulator.validate import validate_file
from simulator.workload import build as workload_build
from simulator.workload import trace_chunks, trace_readers
from simulator.workload.spec import TraceSource
from simulator.workload.trace_readers import TraceStop, load_trace, read_trace
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
        requests = {
            "measured": 10,
            "completed": 10 if passed else 0,
            "unfinished": 0 if passed else 10,
            "rejected_by_reason": {},
        }
        return SimpleNamespace(
            summary={
                "goodput": {
                    "slo_attainment": 1.0 if passed else 0.0,
                    "requests_per_s": 10.0 if passed else 0.0,
                    "requests_per_gpu_s": 10.0 if passed else 0.0,
                },
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


# -- traces: read in chunks, stopping at the end of the slice ------------------
def _jsonl_trace(path: Path, rows: int, tail: str = "") -> Path:
    lines = [
        f'{{"arrival_s": {0.01 * i:.2f}, "prompt_tokens": {100 + i % 7}, "output_tokens": 10}}\n'
        for i in range(rows)
    ]
    path.write_text("".join(lines) + tail)
    return path


def test_a_long_trace_is_read_only_up_to_max_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """30,000 lines (the 10-million-line case scaled down) whose malformed tail is never reached."""
    monkeypatch.setattr(trace_chunks, "CHUNK_ROWS", 1000)
    _jsonl_trace(tmp_path / "trace.jsonl", 30_000, tail="not json\n" + "x" * (2**21) + "\n")
    workload = {
        "source": "trace://trace.jsonl",
        "max_requests": 100,
        "slo": {"ttft_ms": 100, "tpot_ms": 10},
    }
    path = write_scenario(tmp_path, mode="none", workload=workload)
    started = time.perf_counter()
    scenario = load_scenario(path)
    assert time.perf_counter() - started < 5
    spec = scenario.workload
    assert isinstance(spec.source, TraceSource)
    assert len(spec.source.trace) == 100
    assert spec.source.trace.row_of(99) == 100
    without_stop, issues = load_trace(tmp_path / "trace.jsonl")
    assert without_stop is None
    assert any("too long" in issue.format() for issue in issues)


SLICES = [
    TraceStop(0.0, None, 5),
    TraceStop(0.25, 0.5, None),
    TraceStop(0.25, 0.5, 3),
    TraceStop(0.3, None, 1),
    TraceStop(2.0, None, 4),
    TraceStop(0.0, 0.0001, 2),
]


@pytest.mark.parametrize("stop", SLICES, ids=str)
@pytest.mark.parametrize("kind", ["jsonl", "azure"])
def test_a_slice_read_early_equals_the_slice_of_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: TraceStop, kind: str
) -> None:
    monkeypatch.setattr(trace_chunks, "CHUNK_ROWS", 4)
    if kind == "jsonl":
        path = _jsonl_trace(tmp_path / "t.jsonl", 100)
    else:
        path = tmp_path / "t.csv"
        rows = [f"2023-11-16 18:15:{i // 10:02d}.{i % 10}000000,{i % 3},10" for i in range(100)]
        path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    whole = read_trace(path)
    early = read_trace(path, stop=stop)
    assert len(early) < len(whole) or stop.start_s >= 2.0
    end = None if stop.end_s is None else stop.end_s - stop.start_s
    expected = whole.window(stop.start_s, end, stop.max_rows)
    got = early.window(stop.start_s, end, stop.max_rows)
    for name in ("prompt_tokens", "output_tokens", "arrival_s", "source_rows"):
        assert np.array_equal(getattr(got, name), getattr(expected, name)), name
    assert whole.dropped_rows >= early.dropped_rows


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_chunked_reading_gives_the_whole_file_read_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    path = tmp_path / f"t.{suffix}"
    if suffix == "jsonl":
        gold = ', "slo_class": "gold"'
        lines = [
            f'{{"arrival_s": {i}, "prompt_tokens": 5, "output_tokens": 2{gold if i > 6 else ""}}}'
            for i in range(20)
        ]
        path.write_text("\n".join(lines) + "\n")
    else:
        lines = [f"{i},5,2,{'gold' if i % 2 else ''}" for i in range(20)]
        path.write_text("arrival_s,prompt_tokens,output_tokens,slo_class\n" + "\n".join(lines))
    whole = read_trace(path)
    monkeypatch.setattr(trace_chunks, "CHUNK_ROWS", 3)
    chunked = read_trace(path)
    for name in ("prompt_tokens", "output_tokens", "arrival_s", "slo_class", "source_rows"):
        assert np.array_equal(getattr(chunked, name), getattr(whole, name)), name


def test_arrivals_going_backwards_across_chunks_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_chunks, "CHUNK_ROWS", 3)
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,5,2\n1,5,2\n2,5,2\n1.5,5,2\n3,5,2\n")
    table, issues = load_trace(path)
    assert table is None
    (issue,) = issues
    assert issue.key_path == "row 4, column arrival_s"
    assert "row 3" in issue.allowed and "backwards" in issue.problem


def test_a_trace_longer_than_the_row_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_readers, "MAX_TRACE_ROWS", 50)
    monkeypatch.setattr(trace_chunks, "CHUNK_ROWS", 8)
    path = _jsonl_trace(tmp_path / "t.jsonl", 100)
    table, issues = load_trace(path)
    assert table is None
    (issue,) = issues
    assert "more than 50 data rows" in issue.format() and "trace too long" in issue.problem
    assert read_trace(path, stop=TraceStop(0.0, None, 40)).row_of(39) == 40


def test_a_slice_of_more_requests_than_a_run_holds_is_refused_while_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workload_build, "MAX_REQUESTS", 30)
    _jsonl_trace(tmp_path / "trace.jsonl", 100)
    for count in (None, 50):
        workload = {
            "source": "trace://trace.jsonl",
            "max_requests": count,
            "slo": {"ttft_ms": 100, "tpot_ms": 10},
        }
        verdict = validate_file(write_scenario(tmp_path, mode="none", workload=workload))
        assert verdict.error is not None
        (line,) = [issue.format() for issue in verdict.error.issues]
        assert "workload.max_requests" in line and "more than 30 requests" in line
        assert "set workload.max_requests" in line


# -- LUT values ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("column", "value", "allowed"),
    [
        ("latency_ms", 1e308, "a finite number >= 0 and <= 1e+09"),
        ("energy_mj", 1e300, "a finite number >= 0 and <= 1e+14"),
        ("kv_delta_mb", 1e20, "a finite number >= 0 and <= 1e+09"),
    ],
)
def test_lut_values_beyond_their_plausible_range_are_refused(
    tmp_path: Path, column: str, value: float, allowed: str
) -> None:
    path = write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 100, 10))
    lut = tmp_path / "target.csv"
    frame = pd.read_csv(lut)
    frame[column] = frame[column].astype(float)
    frame.loc[0, column] = value
    frame.to_csv(lut, index=False)
    verdict = validate_file(path)
    assert verdict.error is not None
    lines = [issue.format() for issue in verdict.error.issues]
    assert any(
        "target.csv" in line and f"row 2, column {column}" in line and "too large" in line
        for line in lines
    ), lines
    assert any(allowed in line for line in lines), lines


# -- online planner ----------------------------------------------------------------
def _planner(**changes: Any) -> dict[str, Any]:
    planner: dict[str, Any] = {
        "enabled": True,
        "interval_s": 10,
        "window_s": 10,
        "model_load_s": 2.0,
        "candidates": {"verify_replicas": [1, 2]},
    }
    planner.update(changes)
    return planner


def _planner_scenario(tmp_path: Path, **changes: Any) -> Path:
    return write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(5, 1.0, 100, 10),
        extra={"planner": _planner(**changes)},
    )


PLANNER_CASES = {
    "10,000 candidates": (
        {"candidates": {"verify_replicas": list(range(1, 101)), "max_batch": list(range(1, 101))}},
        "planner.candidates",
        "100 x 100 = 10,000 candidates",
        "at most 1,024 candidates",
    ),
    "interval_s 1e-6": ({"interval_s": 1e-6}, "planner.interval_s", "1e-06", ">= 1 s"),
    "window_s 1e9": ({"window_s": 1e9}, "planner.window_s", "1000000000", "<= 100 x"),
    "a candidate of 1,000,000 replicas": (
        {"candidates": {"verify_replicas": [1, 1_000_000]}},
        "planner.candidates.verify_replicas",
        "1000000",
        "at most 4,096 target replicas",
    ),
    "a candidate of 5,000 replicas": (
        {"candidates": {"verify_replicas": [5_000]}},
        "planner.candidates.verify_replicas",
        "5000",
        "at most 4,096 target replicas",
    ),
}


@pytest.mark.parametrize("name", list(PLANNER_CASES))
def test_planner_settings_beyond_their_bounds_are_refused_on_load(
    tmp_path: Path, name: str
) -> None:
    changes, key, value, allowed = PLANNER_CASES[name]
    verdict = validate_file(_planner_scenario(tmp_path, **changes))
    assert verdict.error is not None
    lines = [issue.format() for issue in verdict.error.issues]
    assert any(
        "scenario.yaml" in line and key + ":" in line and value in line and allowed in line
        for line in lines
    ), lines


def test_a_run_whose_planner_would_run_too_many_windows_is_refused_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner_bounds, "MAX_PLANNER_WINDOWS", 5)
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(40, 1.0, 100, 10),
        extra={"planner": _planner(interval_s=1, window_s=1)},
    )
    monkeypatch.setattr("simulator.runner.Engine", _fail_if_run)
    with pytest.raises(InputError) as caught:
        run(load_scenario(path, overrides=["simulation.lut_out_of_range=clamp"]))
    (issue,) = caught.value.issues
    assert issue.key_path == "planner.interval_s"
    assert "what-if windows" in issue.problem and "at most 5 windows per run" in issue.allowed


def test_planner_candidates_are_enumerated_in_linear_time() -> None:
    values = {"verify_replicas": list(range(1, 33)), "max_batch": list(range(1, 33))}
    started = time.perf_counter()
    assert len(enumerate_candidates({k: [*v, *v] for k, v in values.items()})) == 32 * 32
    assert time.perf_counter() - started < 1


# -- closed loop ----------------------------------------------------------------------
def test_a_billion_closed_loop_users_are_refused(tmp_path: Path) -> None:
    workload = synthetic(5, 1.0, 100, 10)
    del workload["synthetic"]["arrival"]
    workload["closed_loop"] = {"users": 1_000_000_000, "think_time_s": 0}
    verdict = validate_file(write_scenario(tmp_path, mode="none", workload=workload))
    assert verdict.error is not None
    (line,) = [issue.format() for issue in verdict.error.issues]
    assert "workload.closed_loop.users" in line and "1000000000" in line
    assert "at most 1,000,000 users" in line


# -- sweeps and plan spaces ---------------------------------------------------------
def test_a_1000_by_1000_sweep_grid_is_refused_before_any_point_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 100, 10))
    grid = {
        "seed": list(range(1000)),
        "workload.arrival_scale": [1 + i / 1000 for i in range(1000)],
    }
    monkeypatch.setattr("simulator.sweeps.spec.load_scenario", _fail_if_run)
    with pytest.raises(InputError) as caught:
        load_sweep({"scenario": str(tmp_path / "scenario.yaml"), "grid": grid})
    (issue,) = caught.value.issues
    assert issue.key_path == "grid" and "1000 x 1000 = 1,000,000 points" in issue.value
    assert "at most 1,000 points" in issue.allowed


def test_a_plan_space_of_too_many_configurations_is_refused_before_any_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_scenario(tmp_path, mode="distributed", workload=synthetic(3, 1.0, 100, 10))
    space = {
        "scenario": str(tmp_path / "scenario.yaml"),
        "pools": {"pool": {"replicas": list(range(1, 31))}},
        "speculation": {"k": list(range(1, 11))},
    }
    monkeypatch.setattr("simulator.sweeps.spec.load_scenario", _fail_if_run)
    with pytest.raises(InputError) as caught:
        load_plan_space(space)
    (issue,) = caught.value.issues
    assert "300 configurations" in issue.value and "at most 256 configurations" in issue.allowed


# -- no non-finite number reaches an output file --------------------------------------
@pytest.mark.parametrize("where", ["requests", "timeseries", "summary"])
def test_a_non_finite_result_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    result = run(
        load_scenario(write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 100, 10)))
    )
    if where == "summary":
        result.summary["latency_ms"]["tpot"]["p99"] = math.inf
        expected = "summary.json: latency_ms.tpot.p99 is inf"
    else:
        frame = getattr(result, where)
        column = frame.select_dtypes(include="float").columns[-1]
        frame.loc[frame.index[1], column] = -math.inf
        expected = f"{where}.csv: column {column}, row 2 is -inf"
    out = tmp_path / "out"
    with pytest.raises(NonFiniteResult) as caught:
        write_results(result, out)
    assert expected in str(caught.value)
    assert not out.exists()
    assert run_guarded(lambda: write_results(result, out) and 0) == EXIT_NON_FINITE_RESULT
    assert expected in capsys.readouterr().err


def test_a_jsonl_key_first_given_after_the_first_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_chunks, "CHUNK_ROWS", 2)
    path = tmp_path / "t.jsonl"
    rows = ['{"prompt_tokens": 5, "output_tokens": 2}'] * 3
    path.write_text(
        "\n".join([*rows, '{"prompt_tokens": 5, "output_tokens": 2, "arrival_s": null}'])
    )
    assert len(read_trace(path)) == 4
    path.write_text("\n".join([*rows, '{"prompt_tokens": 5, "output_tokens": 2, "arrival_s": 7}']))
    table, issues = load_trace(path)
    assert table is None
    (issue,) = issues
    assert issue.key_path == "row 4, column arrival_s" and "some records only" in issue.problem


def test_a_long_csv_trace_is_read_only_up_to_the_end_of_its_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 10-million-row CSV case scaled down: a malformed tail after the slice is never parsed."""
    monkeypatch.setattr(trace_chunks, "CHUNK_ROWS", 1000)
    rows = "".join(f"{0.01 * i:.2f},100,10\n" for i in range(30_000))
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows + "1,2,3,4\nx,y\n")
    table = read_trace(path, stop=TraceStop(1.0, 2.0, None))
    assert table.row_of(len(table) - 1) == 201  # the first row at or after the slice's end
    assert load_trace(path)[0] is None


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_a_line_too_long_is_found_where_it_is_as_it_is_read(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"t.{suffix}"
    if suffix == "csv":
        head = "arrival_s,prompt_tokens,output_tokens\n" + "".join(
            f"{i},5,2\n" for i in range(3000)
        )
    else:
        head = "".join(
            f'{{"arrival_s": {i}, "prompt_tokens": 5, "output_tokens": 2}}\n' for i in range(3000)
        )
    long_line = "9" * (2**20 + 10) + "\n"
    path.write_text(head + long_line + "1,5,2\n")
    table, issues = load_trace(path)
    assert table is None
    (issue,) = issues
    number = 3002 if suffix == "csv" else 3001
    assert issue.key_path == f"line {number}"
    assert issue.problem == f"line of {len(long_line)} bytes is too long"


def test_an_arrival_scale_that_makes_arrival_times_overflow_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path, mode="none", workload=synthetic(3, 1.0, 100, 10))
    code = simulate_main(
        [
            "run",
            str(path),
            "-o",
            str(tmp_path / "out"),
            "-q",
            "--set",
            "workload.arrival_scale=1e-310",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert (
        "workload.arrival_scale" in err
        and "1e-310" in err
        and "arrival times too late once scaled" in err
    )
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def _closed_loop(think: Any) -> dict[str, Any]:
    workload = synthetic(5, 1.0, 100, 10)
    del workload["synthetic"]["arrival"]
    workload["closed_loop"] = {"users": 1, "think_time_s": think}
    return workload


OVERFLOWING: dict[str, tuple[dict[str, Any], str, str]] = {
    "RTT 1e308 ms": (
        {"link": {"src": "laptops", "dst": "pool", "rtt_ms": 1e308, "bw_mbps": 100}},
        "network.links[0].rtt_ms",
        "too large",
    ),
    "bandwidth 1e-300 Mbit/s": (
        {"link": {"src": "laptops", "dst": "pool", "rtt_ms": 1, "bw_mbps": 1e-300}},
        "network.links[0].bw_mbps",
        "too small",
    ),
    "think time 1e308 s": (
        {"workload": _closed_loop(1e308)},
        "workload.closed_loop.think_time_s",
        "too large",
    ),
    "mean think time 1e308 s": (
        {"workload": _closed_loop({"dist": "exponential", "mean_s": 1e308})},
        "workload.closed_loop.think_time_s.mean_s",
        "too large",
    ),
    "arrival rate 1e-308 per s": (
        {"workload": {**synthetic(5, 1e-308, 100, 10)}},
        "workload.synthetic.arrival",
        "arrival times too late",
    ),
}


@pytest.mark.parametrize("name", list(OVERFLOWING))
def test_inputs_that_would_make_a_time_overflow_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    settings, key, problem = OVERFLOWING[name]
    settings = {"workload": synthetic(5, 1.0, 100, 10), **settings}
    path = write_scenario(tmp_path, mode="distributed", **settings)
    assert simulate_main(["run", str(path), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"{key}: {problem}" in err, err
    assert not (tmp_path / "out").exists()


LATE_OR_COSTLY: dict[str, tuple[Any, str, str]] = {
    "a trace gap of 1e300 s": (
        "trace",
        "workload.duration_s",
        "the slice's last arrival is at 1e+300 s",
    ),
    "until_s 1e308": ({"simulation.until_s": 1e308}, "simulation.until_s", "too large"),
    "a price of 1e308 per hour": (
        "hardware_profiles.1.usd_per_hour=1e308",
        "hardware_profiles[1].usd_per_hour",
        "too large",
    ),
    "electricity at 1e308 per kWh": (
        {"metrics.electricity_usd_per_kwh": 1e308},
        "metrics.electricity_usd_per_kwh",
        "too large",
    ),
}


@pytest.mark.parametrize("name", list(LATE_OR_COSTLY))
def test_times_and_prices_whose_totals_would_overflow_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    extra, key, problem = LATE_OR_COSTLY[name]
    workload = synthetic(5, 1.0, 100, 10)
    options = []
    if isinstance(extra, str) and extra != "trace":
        options, extra = ["--set", extra], {}
    if extra == "trace":
        (tmp_path / "trace.csv").write_text(
            "arrival_s,prompt_tokens,output_tokens\n0,100,10\n1e300,100,10\n"
        )
        workload = {"source": "trace://trace.csv", "slo": {"ttft_ms": 100, "tpot_ms": 10}}
        extra = {}
    path = write_scenario(tmp_path, mode="distributed", workload=workload, extra=extra)
    assert simulate_main(["run", str(path), "-o", str(tmp_path / "out"), "-q", *options]) == 2
    err = capsys.readouterr().err
    where = f"--set {options[1]}: " if options else f"{key}: "  # a --set is blamed on the option
    assert where in err and problem in err, err


def test_an_infinite_summary_value_is_an_error_not_null() -> None:
    with pytest.raises(NonFiniteResult) as caught:
        summary_module._clean({"energy": {"total_j": math.inf}, "latency": [1.0, math.nan]})
    assert "summary.json: energy.total_j is inf" in str(caught.value)
    assert summary_module._clean({"latency": [1.0, math.nan]}) == {"latency": [1.0, None]}
