"""Eager lanes in Python threads, measured on an H100, reproduced by the shared GPU.

``lut_population/inputs/lane_threads_h100/lane_threads.csv``: two Python threads,
each looping a launch-bound eager step on its own CUDA stream, slowed each
other's steps about 2x. Built from each step's measured alone times (eager, and
its GPU time as a graph), the same pairs on :class:`SharedGpu` give every
lane's slowdown within 5 % of the median over the three measured runs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import simpy

from simulator.engine.gpu_share import SharedGpu
from simulator.engine.sharing import COMPUTE, HOST, LAUNCH, MEMORY, Segment, measured_sharing

DATA = (
    Path(__file__).resolve().parent.parent
    / "lut_population"
    / "inputs"
    / "lane_threads_h100"
    / "lane_threads.csv"
)
ROWS = pd.read_csv(DATA)
PAIRS = sorted(e for e in set(ROWS["experiment"]) if e.startswith("pair_"))
UNIT = {"draft": (MEMORY, "decode"), "verify": (COMPUTE, "verify")}


def _alone_ms(run: int, step: str, batch: int, mode: str) -> float:
    row = ROWS[
        (ROWS["run"] == run)
        & (ROWS["experiment"] == f"alone_{step}_b{batch}")
        & (ROWS["mode"] == mode)
    ]
    return float(row["median_ms"].iloc[0])


def _pass(run: int, step: str, batch: int) -> list[Segment]:
    """One eager step as the engine prices it: launches, GPU work inside when shorter."""
    eager_s = _alone_ms(run, step, batch, "eager") / 1000
    gpu_s = _alone_ms(run, step, batch, "graph") / 1000
    klass, kind = UNIT[step]
    if eager_s >= gpu_s:
        return [Segment(eager_s, LAUNCH, 0.0, kind, gpu_s)]
    return [Segment(eager_s - gpu_s, HOST), Segment(gpu_s, klass, 0.0, kind)]


def _segments(run: int, step: str, batch: int) -> list[Segment]:
    if step == "round":
        return _pass(run, "draft", batch) * 4 + _pass(run, "verify", batch)
    return _pass(run, step, batch)


def _simulated_slowdowns(run: int, first: str, second: str, batch: int) -> tuple[float, float]:
    env = simpy.Environment()
    gpu = SharedGpu(env, measured_sharing())
    lanes = {"a": _segments(run, first, batch), "b": _segments(run, second, batch)}
    ends: dict[str, list[float]] = {"a": [], "b": []}

    def loop(name: str) -> None:
        ends[name].append(env.now)
        if env.now < 2.0:
            gpu.start(lanes[name], lambda: loop(name))

    loop("a")
    loop("b")
    env.run()
    both = min(ends["a"][-1], ends["b"][-1])
    slowdowns = []
    for name in ("a", "b"):
        marks = [t for t in ends[name] if t <= both]
        step_s = (marks[-1] - marks[0]) / (len(marks) - 1)
        slowdowns.append(step_s / sum(s.duration_s for s in lanes[name]))
    return slowdowns[0], slowdowns[1]


@pytest.mark.parametrize("experiment", PAIRS)
def test_each_measured_pair_of_eager_lanes_is_reproduced(experiment: str) -> None:
    _, first, second, b = experiment.split("_")
    batch = int(b.removeprefix("b"))
    measured = {"a": [], "b": []}
    simulated = {"a": [], "b": []}
    for run in sorted(set(ROWS["run"])):
        rows = ROWS[(ROWS["run"] == run) & (ROWS["experiment"] == experiment)]
        for lane, step in (("a", first), ("b", second)):
            pair_ms = float(rows[rows["lane"] == lane]["median_ms"].iloc[0])
            alone = sum(s.duration_s for s in _segments(run, step, batch)) * 1000
            if step == "round":
                alone = _alone_ms(run, "round", batch, "eager")
            measured[lane].append(pair_ms / alone)
        a, b_ = _simulated_slowdowns(run, first, second, batch)
        simulated["a"].append(a)
        simulated["b"].append(b_)
    for lane in ("a", "b"):
        median = float(pd.Series(measured[lane]).median())
        assert float(pd.Series(simulated[lane]).median()) == pytest.approx(median, rel=0.05)


def test_launch_bound_lanes_share_one_host_thread_and_the_gpu_sits_mostly_idle() -> None:
    """Two launch-bound steps beside each other: each twice as long, GPU active only inside."""
    env = simpy.Environment()
    gpu = SharedGpu(env, measured_sharing())
    step = Segment(0.010, LAUNCH, 0.0, "decode", 0.0025)
    gpu.start([step], lambda: None)
    gpu.start([step], lambda: None)
    env.run()
    assert env.now == pytest.approx(0.020)
    # Each step's 2.5 ms of GPU work ran inside its launches: 5 ms of work in 20 ms.
    assert gpu.time.work_s == pytest.approx(0.005)
    assert gpu.time.active_s == pytest.approx(0.005)


def test_the_measurement_script_says_what_it_needs_without_pytorch(tmp_path, capsys) -> None:
    """Without PyTorch (CI) the script refuses with one message and exit 2, writing nothing."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("PyTorch is installed: the script would measure")
    from tests.script_modules import load_script

    script = load_script(DATA.parents[3] / "scripts" / "measure_lane_threads.py", "lane_threads")
    assert script.main(["--out", str(tmp_path / "out.csv")]) == 2
    assert "needs PyTorch" in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()
