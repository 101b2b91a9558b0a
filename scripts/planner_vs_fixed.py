"""Does the online planner earn its place? A run with it against every fixed configuration it chooses from.

Runs the scenario as written (its ``planner`` on), then once per candidate
configuration with the planner off and that configuration fixed for the whole
run, and compares what each realised: SLO attainment, GPU-hours and good
requests per GPU-second (``summary.json``'s ``goodput.requests_per_gpu_s``,
which counts every replica only while it held its GPUs). A configuration
counts against the planner only if it meets the SLO-attainment floor
(``--floor``); the planner wins when its own run meets the floor and serves
more good requests per GPU-second than every fixed configuration that does.

Fixed configurations are set through the scenario keys the candidate keys
stand for: ``verify_replicas`` is every target pool's ``count``,
``prefill_replicas`` / ``decode_replicas`` every prefill / decode pool's, ``k`` is
``speculation.k`` and ``max_batch`` is ``scheduler.verify.batching.max_batch``;
a scenario whose planner chooses any other key is refused (it has no fixed
equivalent here).

The planner's what-if windows and the fixed runs go to a local process pool
of ``--workers`` processes (default: this machine's CPUs; ``--workers 1``: all
in this process), as ``simulate run`` sends windows: every figure is the same
whichever (each window's seed is fixed, and each fixed run is a run of its own).

Writes ``planner_vs_fixed.csv`` (one row per run) and ``planner_vs_fixed.png``
(arrival rate, serving replicas and SLO attainment over time: the planner's
run and the best fixed configuration meeting the floor) into the output
folder, and prints the table.

Usage::

    python scripts/planner_vs_fixed.py SCENARIO [--floor 0.9] [--bin-s 60] [--workers N] [-o DIR]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes

from simulator import load_scenario, run
from simulator.cli_support import integer_at_least, run_guarded
from simulator.executors import default_workers, execute_with
from simulator.planner.candidates import Candidate, enumerate_candidates
from simulator.planner.windows import window_runner
from simulator.runner import Result

FIXED_KEYS = {
    "verify_replicas": "every target pool's count",
    "prefill_replicas": "every prefill pool's count",
    "decode_replicas": "every decode pool's count",
    "k": "speculation.k",
    "max_batch": "scheduler.verify.batching.max_batch",
}
"""Candidate keys with a fixed equivalent, and the scenario key each stands for."""

ROLE_OF_KEY = {"prefill_replicas": "prefill", "decode_replicas": "decode"}
"""The disaggregated role whose pools each split key sizes (``hardware_profiles[].role``)."""


@dataclass(frozen=True)
class Outcome:
    """What one run realised."""

    label: str
    attainment: float
    gpu_hours: float
    goodput_per_gpu_s: float
    result: Result


def fixed_overrides(document: dict[str, Any], candidate: Candidate) -> list[str]:
    """``--set`` overrides that fix ``candidate`` for a whole run with the planner off.

    Raises:
        ValueError: A candidate key has no fixed equivalent (:data:`FIXED_KEYS`).
    """
    overrides = ["planner={enabled: false}"]
    for name, value in candidate.values:
        if name == "verify_replicas":
            for i, entry in enumerate(document["hardware_profiles"]):
                if entry.get("type") == "target":
                    overrides.append(f"hardware_profiles[{i}].count={int(value)}")
        elif name in ROLE_OF_KEY:
            for i, entry in enumerate(document["hardware_profiles"]):
                if entry.get("type") == "target" and entry.get("role") == ROLE_OF_KEY[name]:
                    overrides.append(f"hardware_profiles[{i}].count={int(value)}")
        elif name == "k":
            overrides.append(f"speculation.k={int(value)}")
        elif name == "max_batch":
            overrides.append(f"scheduler.verify.batching.max_batch={int(value)}")
        else:
            allowed = ", ".join(FIXED_KEYS)
            raise ValueError(
                f"planner.candidates.{name} has no fixed equivalent (allowed: {allowed})"
            )
    return overrides


def outcome(label: str, result: Result) -> Outcome:
    """The figures of one run."""
    goodput = result.summary["goodput"]
    return Outcome(
        label,
        float(goodput["slo_attainment"]),
        float(result.summary["resources"]["gpu_hours"]),
        float(goodput["requests_per_gpu_s"]),
        result,
    )


FixedRun = tuple[str, Path, tuple[str, ...]]
"""A fixed configuration's run: its label, the scenario and the overrides that fix it."""


def compare(path: Path, workers: int | None = None) -> list[Outcome]:
    """The planner's run first, then every fixed configuration of its candidates.

    Args:
        path: The scenario (its planner on).
        workers: Processes of the local pool that runs the planner's windows
            and then the fixed runs (default: this machine's CPUs; 1: all
            here). The outcomes are the same whichever.

    Raises:
        ValueError: The planner is off, or a candidate key has no fixed
            equivalent (before anything runs).
    """
    import yaml

    scenario = load_scenario(path)
    if not scenario.planner.enabled:
        raise ValueError(f"{path}: planner.enabled is false; nothing to compare")
    document = yaml.safe_load(path.read_text())
    fixed: list[FixedRun] = [
        (candidate.key, path, tuple(fixed_overrides(document, candidate)))
        for candidate in enumerate_candidates(scenario.planner.candidates)
    ]
    count = workers if workers is not None else default_workers()
    windows = window_runner("local", count, None)
    try:
        outcomes = [outcome("planner", run(scenario, windows=windows))]
    finally:
        windows.close()
    done = dict(execute_with(_fixed_run, fixed, "local", count, None))
    return outcomes + [outcome(label, done[label]) for label, _path, _overrides in fixed]


def _fixed_run(task: FixedRun) -> tuple[str, Result]:
    """Run one fixed configuration (in a pool's worker, or here); return its label and result.

    Only the simulator's own types come back from a worker: this script may be
    loaded under its name more than once, and a class of its own would then not
    unpickle as the caller's.
    """
    label, path, overrides = task
    return label, run(load_scenario(path, overrides=list(overrides)))


def table(outcomes: Sequence[Outcome], floor: float) -> pd.DataFrame:
    """One row per run: attainment, GPU-hours, goodput per GPU-second, whether it meets the floor."""
    return pd.DataFrame(
        {
            "run": [o.label for o in outcomes],
            "slo_attainment": [o.attainment for o in outcomes],
            "gpu_hours": [o.gpu_hours for o in outcomes],
            "good_per_gpu_s": [o.goodput_per_gpu_s for o in outcomes],
            "meets_floor": [o.attainment >= floor for o in outcomes],
        }
    )


def best_fixed(outcomes: Sequence[Outcome], floor: float) -> Outcome | None:
    """The fixed configuration meeting the floor with the most good requests per GPU-second."""
    meeting = [o for o in outcomes[1:] if o.attainment >= floor]
    return max(meeting, key=lambda o: o.goodput_per_gpu_s) if meeting else None


def _binned(requests: pd.DataFrame, bin_s: float) -> pd.DataFrame:
    """Per bin of arrival time: arrivals per second and the share meeting every SLO."""
    bins = (requests["arrival_s"] // bin_s).astype(int)
    grouped = requests.groupby(bins)
    return pd.DataFrame(
        {
            "time_s": grouped["arrival_s"].min().index * bin_s,
            "rate_per_s": grouped.size().to_numpy() / bin_s,
            "attainment": grouped["slo_met"].mean().to_numpy(),
        }
    )


def plot_runs(
    planner: Outcome, fixed: Outcome | None, bin_s: float, axes: Sequence[Axes] | None = None
) -> Sequence[Axes]:
    """Arrival rate, serving replicas and SLO attainment over time (three panels)."""
    if axes is None:
        _, created = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
        axes = list(created)
    load = _binned(planner.result.requests, bin_s)
    axes[0].plot(load["time_s"], load["rate_per_s"], color="black")
    axes[0].set_ylabel("arrivals / s")
    log = planner.result.planner_log
    if not log.empty:
        chosen = log[log["chosen"]]
        pools = len(set(planner.result.output.replica_pools)) or 1
        first = sum(int(part.split("=")[1]) for part in str(chosen["serving"].iloc[0]).split())
        times = [0.0, *chosen["time_s"]]
        output = planner.result.output
        if output.disaggregation is not None:
            roles = dict(
                zip(output.replica_pools, output.disaggregation.replica_roles, strict=True)
            )
            replicas = [
                first,
                *(
                    _split_replicas(str(key), str(serving), roles)
                    for key, serving in zip(chosen["candidate"], chosen["serving"], strict=True)
                ),
            ]
        else:
            replicas = [first, *(_replicas(str(key), pools, first) for key in chosen["candidate"])]
        axes[1].step(times, replicas, where="post", label="planner")
    if fixed is not None:
        axes[1].axhline(
            len(fixed.result.output.replica_pools),
            color="grey",
            linestyle="--",
            label=f"best fixed: {fixed.label}",
        )
    axes[1].set_ylabel("serving replicas")
    axes[1].legend(loc="best")
    for out, style in ((planner, "-"), (fixed, "--")):
        if out is None:
            continue
        attained = _binned(out.result.requests, bin_s)
        axes[2].plot(attained["time_s"], attained["attainment"], style, label=out.label)
    axes[2].set_ylabel("SLO attainment")
    axes[2].set_xlabel("arrival time (s)")
    axes[2].legend(loc="best")
    return axes


def _replicas(key: str, pools: int, default: int) -> int:
    """Serving replicas a chosen candidate sets (``verify_replicas`` times the pools)."""
    for part in key.split():
        name, _, value = part.partition("=")
        if name == "verify_replicas":
            return int(float(value)) * pools
    return default


def _split_replicas(key: str, serving: str, roles: dict[str, str]) -> int:
    """Replicas a chosen candidate of a disaggregated fleet sets.

    Each pool of a role the candidate sizes has the candidate's value; the
    others keep their count at the round (``serving``: ``pool=count`` pairs).
    """
    values = {}
    for part in key.split():
        name, _, value = part.partition("=")
        if name in ROLE_OF_KEY:
            values[ROLE_OF_KEY[name]] = int(float(value))
    total = 0
    for part in serving.split():
        pool, _, count = part.partition("=")
        total += values.get(roles.get(pool, ""), int(count))
    return total


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--floor", type=float, default=0.9, help="SLO-attainment floor (0-1)")
    parser.add_argument("--bin-s", type=float, default=60.0, help="seconds per bin of the figure")
    parser.add_argument(
        "--workers",
        type=integer_at_least(1),
        default=None,
        help="processes for the windows and the fixed runs (default: this machine's CPUs)",
    )
    parser.add_argument("-o", "--output", type=Path, default=Path("results/planner_vs_fixed"))
    args = parser.parse_args(argv)
    if not 0.0 <= args.floor <= 1.0 or not math.isfinite(args.floor):
        parser.error(f"--floor {args.floor}: allowed 0 to 1")
    if not args.bin_s > 0 or not math.isfinite(args.bin_s):
        parser.error(f"--bin-s {args.bin_s}: allowed a number of seconds > 0")
    try:
        outcomes = compare(args.scenario, args.workers)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    frame = table(outcomes, args.floor)
    args.output.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.output / "planner_vs_fixed.csv", index=False)
    axes = plot_runs(outcomes[0], best_fixed(outcomes, args.floor), args.bin_s)
    axes[0].figure.savefig(args.output / "planner_vs_fixed.png", dpi=120, bbox_inches="tight")
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
