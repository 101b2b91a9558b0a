"""Sweeps: tables identical across executors, resume, failures, errors, capacity search."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pickle
import shutil
import signal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simulator import content_hash, load_scenario, run
from simulator.cli import main
from simulator.errors import InputError
from simulator.executors import WorkerDied, execute_with
from simulator.sweeps import capacity, sweep
from simulator.sweeps import execute as execute_module
from tests.commands import ROOT
from tests.engine_fixtures import synthetic, write_lut, write_scenario


def _scenario(tmp_path: Path) -> Path:
    return write_scenario(tmp_path, mode="distributed", workload=synthetic(12, 4.0, 64, 16))


def _sweep_file(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"scenario": "scenario.yaml", **body}))
    return path


GRID = {"grid": {"seed": [1, 2], "workload.arrival_scale": [0.5, 1.0, 2.0, 4.0]}}


@pytest.mark.slow
def test_eight_runs_identical_on_one_and_two_workers(tmp_path):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, GRID)
    one = sweep(file, tmp_path / "one", workers=1)
    two = sweep(file, tmp_path / "two", workers=2)
    pd.testing.assert_frame_equal(one, two)
    assert len(one) == 8
    assert list(one["point"]) == list(range(8))
    assert list(one["seed"]) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert list(one["workload.arrival_scale"])[:4] == [0.5, 1.0, 2.0, 4.0]
    assert (one["status"] == "ok").all()
    assert (tmp_path / "one/sweep.csv").read_bytes() == (tmp_path / "two/sweep.csv").read_bytes()
    assert "wall" not in (tmp_path / "one/sweep.csv").read_text().splitlines()[0]
    # Each point's own results directory holds the run (its summary is the row's source).
    summary = json.loads((tmp_path / "one/runs/0005/summary.json").read_text())
    assert one.loc[5, "latency_ms.ttft.p99"] == summary["latency_ms"]["ttft"]["p99"]
    assert summary["seed"] == 2
    # A higher arrival scale offers more requests per second.
    assert one.loc[3, "offered_requests_per_s"] > one.loc[0, "offered_requests_per_s"]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed: the test extra installs it where PyPI has a Ray wheel for "
    "this platform and Python (pip install 'specdec-sim[ray]')",
)
def test_ray_local_gives_the_same_table(tmp_path):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, GRID)
    sweep(file, tmp_path / "local", workers=1)
    sweep(file, tmp_path / "ray", executor="ray", workers=2)
    assert (tmp_path / "local/sweep.csv").read_bytes() == (tmp_path / "ray/sweep.csv").read_bytes()


def test_resume_skips_finished_runs(tmp_path):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"grid": {"workload.arrival_scale": [0.5, 1.0, 2.0, 4.0]}})
    out = tmp_path / "out"
    sweep(file, out, workers=1)
    first = (out / "sweep.csv").read_bytes()
    kept = (out / "runs/0000/run.json").stat().st_mtime_ns
    # As a killed sweep leaves it: two runs finished, no table yet.
    for name in ("0002", "0003"):
        for entry in (out / "runs" / name).iterdir():
            entry.unlink()
        (out / "runs" / name).rmdir()
    (out / "sweep.csv").unlink()
    sweep(file, out, workers=2)
    runs = pd.read_csv(out / "sweep_runs.csv")
    assert list(runs["outcome"]) == ["resumed", "resumed", "ran", "ran"]
    assert (out / "runs/0000/run.json").stat().st_mtime_ns == kept
    assert (out / "sweep.csv").read_bytes() == first


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_rerunning_finished_runs(tmp_path):
    """SIGKILL a real ``simulate sweep`` after its second run; the rerun keeps the finished ones."""
    import os
    import signal
    import subprocess
    import sys
    import time

    _scenario(tmp_path)
    scales = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    file = _sweep_file(tmp_path, {"grid": {"workload.arrival_scale": scales}})
    out = tmp_path / "out"
    command = [sys.executable, "-m", "simulator", "sweep", str(file), "-o", str(out)]
    process = subprocess.Popen([*command, "--workers", "1", "-q"], cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not (out / "runs/0001/run.json").exists():
        assert process.poll() is None, "the sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (out / "sweep.csv").exists()
    finished = {p.parent.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*/run.json")}
    assert {"0000", "0001"} <= set(finished)
    assert len(finished) < len(scales)
    subprocess.run([*command, "--workers", "2", "-q"], cwd=tmp_path, check=True)
    runs = pd.read_csv(out / "sweep_runs.csv")
    resumed = set(runs.loc[runs["outcome"] == "resumed", "point"].map("{:04d}".format))
    assert resumed == set(finished)
    for name, mtime in finished.items():
        assert (out / "runs" / name / "run.json").stat().st_mtime_ns == mtime
    assert len(pd.read_csv(out / "sweep.csv")) == len(scales)


def _rerun_with_stale_key(tmp_path: Path, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Sweep two points, mark the second's ``run.json`` ``key`` as stale, sweep again.

    Returns the second point's ``run.json`` before and after the second sweep.
    """
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"points": [{"seed": 1}, {"seed": 2}]})
    out = tmp_path / "out"
    sweep(file, out, workers=1)
    info_path = out / "runs/0001/run.json"
    before = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**before, key: "0" * 64}))
    sweep(file, out, workers=1)
    assert list(pd.read_csv(out / "sweep_runs.csv")["outcome"]) == ["resumed", "ran"]
    return before, json.loads(info_path.read_text())


def test_a_changed_scenario_is_rerun(tmp_path):
    _, after = _rerun_with_stale_key(tmp_path, "scenario_sha256")
    assert after["scenario_sha256"] != "0" * 64


def test_a_failing_run_is_recorded_and_the_others_go_on(tmp_path, monkeypatch):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"grid": {"seed": [1, 2, 3]}})
    real_run = execute_module.run

    def failing(scenario):
        if scenario.seed == 2:
            raise RuntimeError("broken\nsecond line")
        return real_run(scenario)

    monkeypatch.setattr(execute_module, "run", failing)
    frame = sweep(file, tmp_path / "out", workers=1)
    assert list(frame["status"]) == ["ok", "failed", "ok"]
    assert frame.loc[1, "error"] == "RuntimeError: broken | second line"
    assert pd.isna(frame.loc[1, "latency_ms.ttft.p99"])
    assert not (tmp_path / "out/runs/0001").exists()
    assert (tmp_path / "out/runs/0002/summary.json").is_file()
    # The failed point is run again next time; the others are not.
    monkeypatch.setattr(execute_module, "run", real_run)
    again = sweep(file, tmp_path / "out", workers=1)
    assert list(again["status"]) == ["ok", "ok", "ok"]
    outcomes = pd.read_csv(tmp_path / "out/sweep_runs.csv")["outcome"]
    assert list(outcomes) == ["resumed", "ran", "resumed"]


def test_cli_sweep_writes_the_table(tmp_path, capsys):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"sweep_id": "s", "points": [{"speculation.k": 2}]})
    assert main(["sweep", str(file), "-o", str(tmp_path / "out"), "--workers", "1"]) == 0
    assert capsys.readouterr().out == "1 point run, 0 resumed, 0 failed\n"
    assert pd.read_csv(tmp_path / "out/sweep.csv").loc[0, "speculation.k"] == 2
    assert main(["sweep", str(file), "-o", str(tmp_path / "out"), "--workers", "1"]) == 0
    assert capsys.readouterr().out == "0 points run, 1 resumed, 0 failed\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"grid": {"workload.arival_scale": [1, 2]}}, "arival_scale"),
        ({"grid": {"speculation.k": [2, -1]}}, "speculation.k"),
        ({"grid": {"seed": []}}, "grid.seed"),
        ({"grid": {"seed": [1]}, "points": [{"seed": 1}]}, "exactly one of grid"),
        ({}, "exactly one of grid"),
        ({"grid": {"seed": [1]}, "executor": "ray"}, "executor"),
        ({"grid": {"seed": [1, 2, 1]}}, "grid.seed: duplicate items (got [1, 2, 1]"),
        ({"points": [{"seed": 1}, {"seed": 1}]}, "points: duplicate items"),
    ],
)
def test_bad_sweep_files_fail_up_front(tmp_path, capsys, body, expected):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, body)
    assert main(["sweep", str(file), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert str(file) in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_bad_set_entry_is_reported_once_at_its_key(tmp_path):
    """A ``set`` entry's problem is the sweep file's ``set.<key>``, not each point's scenario's."""
    from simulator.sweeps import load_sweep

    _scenario(tmp_path)
    body = {"set": {"nope.key": 1, "speculation.k": "abc"}, "grid": {"seed": [1, 2]}}
    with pytest.raises(InputError) as caught:
        load_sweep(_sweep_file(tmp_path, body))
    file = tmp_path / "sweep.yaml"
    assert [issue.format() for issue in caught.value.issues] == [
        f"{file}: set.nope.key: unknown key (got 'nope'; allowed: keys hardware_profiles, "
        "metadata, metrics, network, planner, scenario_id, scheduler, seed, simulation, "
        "speculation, workload)",
        f"{file}: set.speculation.k: wrong type (got 'abc'; allowed: integer >= 1)",
    ]


def test_an_empty_points_entry_says_what_it_needs(tmp_path):
    from simulator.sweeps import load_sweep

    _scenario(tmp_path)
    with pytest.raises(InputError) as caught:
        load_sweep(_sweep_file(tmp_path, {"points": [{}]}))
    assert "points[0]: too few entries (got {}; allowed: object with at least 1 entry)" in str(
        caught.value
    )


def test_unknown_executor_and_bad_workers_are_refused(tmp_path):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"grid": {"seed": [1]}})
    with pytest.raises(InputError, match="unknown executor"):
        sweep(file, tmp_path / "out", executor="dask")
    with pytest.raises(InputError, match="--workers"):
        sweep(file, tmp_path / "out", workers=0)
    assert not (tmp_path / "out").exists()


def test_scenario_and_result_pickle(tmp_path):
    scenario = load_scenario(_scenario(tmp_path))
    copy = pickle.loads(pickle.dumps(scenario))
    assert copy.resolved_json == scenario.resolved_json
    result = run(scenario)
    again = pickle.loads(pickle.dumps(result))
    assert again.summary == result.summary
    assert again.requests.equals(result.requests)
    assert run(copy).summary == result.summary


def test_capacity_bisects_to_the_highest_passing_scale(tmp_path):
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(40, 10.0, 64, 16, slo={"ttft_ms": 150, "tpot_ms": 100, "tvt_ms": 200}),
    )
    found = capacity(path, 0.9, low=0.1, high=50.0, tolerance=0.1)
    assert found.best is not None and found.best.passed
    assert not found.capped
    failing = [p.arrival_scale for p in found.probes if not p.passed]
    above = min(s for s in failing if s > found.best.arrival_scale)
    assert above <= found.best.arrival_scale * 1.1
    assert all(p.passed for p in found.probes if p.arrival_scale <= found.best.arrival_scale)
    assert found.gpus == 1
    assert found.requests_per_gpu_s == found.best.offered_requests_per_s
    assert "requests/s per GPU" in found.describe()


def test_capacity_cli_and_no_passing_rate(tmp_path, capsys):
    path = write_scenario(
        tmp_path,
        mode="distributed",
        workload=synthetic(20, 10.0, 64, 16, slo={"ttft_ms": 1, "tpot_ms": 1, "tvt_ms": 1}),
    )
    assert main(["capacity", str(path), "--slo-attainment", "0.9", "-q"]) == 0
    assert "no rate meets SLO attainment 90.0%" in capsys.readouterr().out
    assert main(["capacity", str(path), "--slo-attainment", "1.5"]) == 2
    assert "--slo-attainment" in capsys.readouterr().err


def test_a_pickled_scenario_runs_under_another_hash_seed(tmp_path):
    # Ray workers are fresh processes: text hashes differ from the parent's.
    import os
    import subprocess
    import sys

    scenario = load_scenario(_scenario(tmp_path))
    (tmp_path / "s.pkl").write_bytes(pickle.dumps(scenario))
    code = (
        "import pickle, sys; from simulator import run; "
        "s = pickle.load(open(sys.argv[1], 'rb')); print(run(s).summary['requests']['completed'])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "s.pkl")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == run(scenario).summary["requests"]["completed"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["low_rtt_k_rate.yaml", "bench_sweep.yaml"])
def test_shipped_sweep_files_resolve(name):
    from simulator.sweeps import load_sweep

    loaded = load_sweep(Path(__file__).resolve().parent.parent / "scenarios" / "sweeps" / name)
    assert len(loaded.points) == {"low_rtt_k_rate.yaml": 4, "bench_sweep.yaml": 40}[name]
    assert len({p.sha256 for p in loaded.points}) == len(loaded.points)


def _exit_on_seed_2(scenario):
    if scenario.seed == 2:
        os._exit(3)
    return _REAL_RUN(scenario)


def _kill_on_seed_2(scenario):
    if scenario.seed == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return _REAL_RUN(scenario)


_REAL_RUN = execute_module.run


@pytest.mark.parametrize(
    ("runner", "reason"),
    [
        (_exit_on_seed_2, "worker process exited with status 3 before returning a result"),
        (_kill_on_seed_2, "worker process killed by SIGKILL (out of memory?) before returning"),
    ],
    ids=["os._exit", "SIGKILL"],
)
def test_a_dying_worker_fails_its_point_and_the_table_is_written(
    tmp_path, monkeypatch, capsys, runner, reason
):
    """A worker process that dies takes its own point only; the others finish, the table is written."""
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"points": [{"seed": 1}, {"seed": 2}, {"seed": 3}]})
    monkeypatch.setattr(execute_module, "run", runner)
    assert main(["sweep", str(file), "-o", str(tmp_path / "out"), "--workers", "2"]) == 1
    assert capsys.readouterr().out == "2 points run, 0 resumed, 1 failed\n"
    frame = pd.read_csv(tmp_path / "out/sweep.csv")
    assert list(frame["status"]) == ["ok", "failed", "ok"]
    assert reason in frame.loc[1, "error"]
    runs = pd.read_csv(tmp_path / "out/sweep_runs.csv")
    assert list(runs["outcome"]) == ["ran", "failed", "ran"]


def test_a_worker_death_without_a_stand_in_raises_worker_died():
    with pytest.raises(WorkerDied, match="exited with status 3"):
        list(execute_with(_exit_on_three, [1, 2, 3, 4], "local", 2, None))
    results = execute_with(_exit_on_three, [1, 2, 3, 4], "local", 2, None, lambda t, why: -t)
    assert sorted(results) == [-3, 1, 2, 4]


def _exit_on_three(task: int) -> int:
    if task == 3:
        os._exit(3)
    return task


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("summary.json", '{"latency_ms": {"ttft"'),
        ("summary.json", "[" * 100_000 + "]" * 100_000),
        ("run.json", "[" * 100_000 + "]" * 100_000),
    ],
)
def test_a_damaged_summary_of_a_finished_point_runs_it_again(tmp_path, name, damage):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"points": [{"seed": 1}, {"seed": 2}]})
    out = tmp_path / "out"
    first = sweep(file, out, workers=1)
    table = (out / "sweep.csv").read_bytes()
    (out / "runs/0001" / name).write_text(damage)
    again = sweep(file, out, workers=1)
    assert list(pd.read_csv(out / "sweep_runs.csv")["outcome"]) == ["resumed", "ran"]
    assert again.attrs["outcomes"] == {"ran": 1, "resumed": 1, "failed": 0}
    pd.testing.assert_frame_equal(first, again)
    assert (out / "sweep.csv").read_bytes() == table


def test_an_edited_input_file_runs_the_points_again(tmp_path):
    """The LUT a scenario names is keyed by content, not path: an edit makes its results stale."""
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"points": [{"seed": 1}, {"seed": 2}]})
    out = tmp_path / "out"
    before = sweep(file, out, workers=1)
    info = json.loads((out / "runs/0000/run.json").read_text())
    lut = str((tmp_path / "target.csv").resolve())
    assert info["input_sha256"][lut] == content_hash.file_sha256(Path(lut))
    write_lut(
        tmp_path / "target.csv",
        "target-model",
        "a100-sxm4-80gb",
        {
            "prefill": lambda c, b, _k: 10.0 + 0.01 * c * b,
            "draft_decode": lambda c, b, _k: 20.0 + 0.001 * c * b,
            "verify": lambda c, b, k: 44.0 + 0.001 * c * b * (k + 1),
        },
    )
    after = sweep(file, out, workers=1)
    assert list(pd.read_csv(out / "sweep_runs.csv")["outcome"]) == ["ran", "ran"]
    assert (after["latency_ms.tpot.p99"] > before["latency_ms.tpot.p99"]).all()
    assert (
        json.loads((out / "runs/0000/run.json").read_text())["input_sha256"][lut]
        != (info["input_sha256"][lut])
    )


def test_results_of_other_code_run_again(tmp_path):
    before, after = _rerun_with_stale_key(tmp_path, "code_sha256")
    assert before["code_sha256"] == content_hash.code_sha256()
    assert before["specdec_sim_version"]
    assert after["code_sha256"] == content_hash.code_sha256()


def test_the_code_identity_follows_the_sources(tmp_path, monkeypatch):
    files = dict(content_hash._code_files())
    assert "simulator/content_hash.py" in files and "policies/__init__.py" in files
    assert not [name for name in files if "__pycache__" in name]
    source = tmp_path / "module.py"
    source.write_text("P99 = 0.99\n")
    monkeypatch.setattr(content_hash, "_code_files", lambda: [("simulator/module.py", source)])
    content_hash.code_sha256.cache_clear()
    try:
        first = content_hash.code_sha256()
        source.write_text("P99 = 0.999\n")
        content_hash.code_sha256.cache_clear()
        assert content_hash.code_sha256() != first
    finally:
        content_hash.code_sha256.cache_clear()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_ray_worker_death_fails_its_task_only():
    results = execute_with(_exit_on_three, [1, 2, 3, 4], "ray", 2, None, lambda t, why: why)
    outcomes = sorted(map(str, results))
    assert outcomes[:3] == ["1", "2", "4"]
    assert outcomes[3].startswith("Ray worker died: ")


def test_the_input_hashes_cover_profiles_luts_acceptance_traces_and_builtin_data(tmp_path):
    path = _scenario(tmp_path)
    document = yaml.safe_load(path.read_text())
    document["hardware_profiles"][1]["profile"] = "builtin:device_profiles/a100-tp1.yaml"
    document["workload"] = {
        "source": "trace://trace.csv",
        "duration_s": 10,
        "slo": document["workload"]["slo"],
    }
    shutil.copy(ROOT / "scenarios/traces/azure_code_2k.csv", tmp_path / "trace.csv")
    path.write_text(yaml.safe_dump(document))
    hashes = content_hash.input_sha256(load_scenario(path))
    names = {Path(reference).name for reference in hashes}
    assert names == {
        "rtx-4050-laptop.yaml",
        "a100-tp1.yaml",
        "draft.csv",
        "target.csv",
        "acc.yaml",
    } | {"trace.csv"}
    assert hashes["builtin:device_profiles/a100-tp1.yaml"] == content_hash.file_sha256(
        ROOT / "device_profiles/a100-tp1.yaml"
    )
    trace = str((tmp_path / "trace.csv").resolve())
    assert hashes[trace] == hashlib.sha256((tmp_path / "trace.csv").read_bytes()).hexdigest()


def test_an_interrupted_sweep_names_the_points_it_wrote(tmp_path, monkeypatch, capsys):
    _scenario(tmp_path)
    file = _sweep_file(tmp_path, {"points": [{"seed": 1}, {"seed": 2}]})

    def interrupted(scenario):
        if scenario.seed == 2:
            raise KeyboardInterrupt
        return _REAL_RUN(scenario)

    monkeypatch.setattr(execute_module, "run", interrupted)
    out = tmp_path / "out"
    assert main(["sweep", str(file), "-o", str(out), "--workers", "1"]) == 130
    err = capsys.readouterr().err.strip()
    assert (
        err == f"interrupted: new results were written to {out / 'runs/0000'} before the interrupt"
    )
    assert (out / "runs/0000/summary.json").is_file()
