"""The Verify-PD concurrency sweep: lane architectures against batch size C, two accountings.

Builds the sweep points (lane architecture x C x host overhead, open and closed
loop, plus the fused engine without lanes and plain decoding without speculation
on the same target), runs them with
:func:`simulator.sweep` on the local pool or Ray, and computes from every run's
``requests.csv`` two accountings:

- ``completed``: completed requests only, as the Verify-PD documents report their
  runs: throughput is the completed requests' output tokens over the span from
  the first of their arrivals to the last of their completions, and p95/p99 are
  percentiles of their end-to-end latencies.
- ``all``: every request that arrived before the cut. Those not completed are
  ``unfinished``; throughput is every token generated (partial outputs included)
  over the whole run, and an unfinished request enters the latency percentiles
  at its age at the cut (a lower bound of its latency).

Outputs in the output directory: ``results.csv``, ``results.md`` (the same as a
table), ``throughput.png`` and ``p95.png`` (per architecture against C, one
panel per loop, host overhead and accounting), and the sweeps' own directories under
``runs/``. ``--sweep001`` runs the smaller sweep instead: C from 1 to 10, ten
requests per level sent by C closed-loop users, 100 output tokens, no cut.

``--overlap E,E,...`` runs the overlap sensitivity sweep instead: beside its
serialized point, every architecture whose lanes run concurrently under
``gpu_sharing: overlap`` (:data:`OVERLAP_ARCHITECTURES`) runs once per
``overlap_efficiency`` E; by default closed loop, 0 ms host overhead, C in
:data:`OVERLAP_CONCURRENCY`, and ``engine`` as the reference without lanes. The
columns ``gpu_sharing`` and ``overlap_efficiency`` (empty when serialized) say
which, and ``overlap.png`` plots throughput against the efficiency.

``--k-controller NAME`` runs every speculative point (the lane architectures and
``engine``; not ``none``) with that registered draft-length controller
(``speculation.adaptive_k``, its default parameters, starting at the scenario's
``speculation.k`` and choosing within :data:`K_MIN` .. :data:`K_MAX`, the range of
the Verify-PD documents' controller); the column ``k_controller`` says which
(``static``: the scenario's fixed k, the default).

``--workload azure_conv`` resamples prompt and output lengths from the Azure
conversation trace (a mixed workload; column ``workload``). Every row also has
the completed requests' TPOT percentiles (``tpot_p95_ms``, ``tpot_p99_ms``) and
the run's ``resources`` figures (``gpu_utilization``, host time included;
``gpu_kernel_active`` and ``gpu_work_rate``, lane architectures only).

``--engine NAME`` runs every target pool, lanes or not, under that engine
profile (``eager-pytorch``: the documents' own engine, every forward pass
launched from Python); the column ``engine`` says which. ``--gpu-sharing
measured`` overlaps the lanes of the points without an ``--overlap``
efficiency as two CUDA streams measured on an H100 do (column ``gpu_sharing``
``measured``; ``pdv_unified`` stays serialized).

Usage::

    python scripts/verify_pd_sweep.py [--reduced] [--sweep001] [-o DIR]
        [--scenario FILE] [--host-overhead-ms MS] [--loops open,closed]
        [--architectures A,B,...] [--concurrency C,C,...] [--overlap E,E,...]
        [--k-controller NAME] [--engine NAME] [--gpu-sharing serialized|measured]
        [--workload fixed|azure_conv]
        [--executor local|ray] [--workers N]

The analysis of the results is in scenarios/verify_pd/README.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import yaml
from matplotlib.axes import Axes

import policies
import simulator
from simulator.cli_support import run_guarded
from simulator.devices.engine_profile import BUNDLED_ENGINES, DEFAULT_ENGINE
from simulator.loading import bounds_text, load_packaged_schema, read_document

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIO = ROOT / "scenarios" / "verify_pd" / "llama2_7b_tinyllama_a100.yaml"
#: The concurrency levels of the Verify-PD documents' sweep.
CONCURRENCY = (1, 2, 4, 6, 8, 10, 12, 16, 32, 64, 72, 84, 96, 128)
#: The smaller sweep's levels (the documents' level 0 has no meaning as a batch limit).
CONCURRENCY_001 = tuple(range(1, 11))
LANE_ARCHITECTURES = ("baseline", "pd", "pdv", "pdv_hybrid", "pdv_unified")
#: ``engine``: the optimised fused replica; ``none``: no speculation on the same target.
ARCHITECTURES = (*LANE_ARCHITECTURES, "engine", "none")
REDUCED_CONCURRENCY = (1, 8)
REDUCED_ARCHITECTURES = ("pd", "pdv")
#: Lane architectures whose lanes (or, under ``baseline``, per-request workers) run
#: iterations concurrently under ``gpu_sharing: overlap``; ``pdv_unified`` runs one
#: iteration at a time and refuses ``overlap``.
OVERLAP_ARCHITECTURES = ("baseline", "pd", "pdv", "pdv_hybrid")
#: The overlap sensitivity sweep's default architectures: those that overlap, and the
#: fused engine (no lanes, unaffected by ``gpu_sharing``) as the reference.
OVERLAP_SWEEP_ARCHITECTURES = (*OVERLAP_ARCHITECTURES, "engine")
#: The overlap sensitivity sweep's reduced set of C.
OVERLAP_CONCURRENCY = (1, 8, 32, 128)
#: The k controller of the runs without ``--k-controller``: the scenario's fixed k.
STATIC_K_CONTROLLER = "static"
#: ``speculation.adaptive_k`` bounds under ``--k-controller``: the range 2-8 of the
#: Verify-PD documents' controller (policies/README.md, ``acceptance_feedback``); it
#: starts at the scenario's ``speculation.k`` (4).
K_MIN = 2
K_MAX = 8
#: Documents-like host time per model forward pass (configuration; see the scenario README).
DOCUMENTS_HOST_OVERHEAD_MS = 5.0
#: Arrivals per second per unit of C (the documents' Poisson rate, 0.05 x C).
RATE_PER_C = 0.05
#: Closed-loop request table: more requests than any point completes before the cut.
CLOSED_LOOP_REQUESTS = 50_000
COLUMNS = (
    "architecture",
    "concurrency",
    "host_overhead",
    "loop",
    "accounting",
    "arrived",
    "completed",
    "unfinished",
    "throughput_tok_s",
    "mean_ms",
    "p95_ms",
    "p99_ms",
    "tpot_p95_ms",
    "tpot_p99_ms",
    "gpu_sharing",
    "overlap_efficiency",
    "k_controller",
    "engine",
    "workload",
    "gpu_utilization",
    "gpu_kernel_active",
    "gpu_work_rate",
)
#: The columns read from a run's ``summary.json`` ``resources`` (the same in both accountings).
RESOURCE_COLUMNS = ("gpu_utilization", "gpu_kernel_active", "gpu_work_rate")
#: ``--workload``: the scenario's own lengths, or prompts and outputs resampled from the
#: Azure LLM inference conversation trace (a mixed workload: short and long prompts).
WORKLOADS = {"fixed": None, "azure_conv": ROOT / "scenarios" / "traces" / "azure_conv_10k.csv"}
#: Scenario keys that hold file paths (relative to the scenario file).
_PATH_LISTS = (
    ("hardware_profiles", "profile"),
    ("speculation", "fused_models", "lut"),
    ("speculation", "verifier_models", "lut"),
    ("speculation", "draft_models", "lut"),
    ("speculation", "acceptance_models", "file"),
)


@dataclass(frozen=True)
class Variant:
    """One base scenario derived from the experiment's scenario file.

    Attributes:
        name: Its directory name under ``runs/``.
        loop: ``open`` (Poisson arrivals) or ``closed`` (C users, no think time).
        kind: ``lanes`` (the lane architectures, with host overhead), ``engine``
            (the fused replica of ``scheduler.arbitration``; it has no lanes and no
            host overhead setting) or ``none`` (plain decoding on the same target).
    """

    name: str
    loop: str
    kind: str


@dataclass(frozen=True)
class PointLabel:
    """What one sweep point stands for in ``results.csv``.

    Attributes:
        architecture: One of :data:`ARCHITECTURES`.
        concurrency: C.
        host_overhead: ``host_overhead_ms`` of the lanes (0 for ``engine`` and ``none``).
        gpu_sharing: ``serialized`` or ``measured`` (``gpu_sharing: overlap`` with
            the H100 measurement) for points without an ``overlap_efficiency``.
        overlap_efficiency: ``None``: the lanes share the GPU as ``gpu_sharing`` says (and
            ``engine``/``none``, which run one iteration at a time); otherwise
            ``gpu_sharing: overlap`` with this efficiency.
    """

    architecture: str
    concurrency: int
    host_overhead: float
    overlap_efficiency: float | None = None
    gpu_sharing: str = "serialized"


def _absolute(base_dir: Path, value: str) -> str:
    path = Path(value)
    return str(path if path.is_absolute() else (base_dir / path).resolve())


def variant_document(
    base: Mapping[str, Any],
    base_dir: Path,
    variant: Variant,
    num_requests: int | None,
    engine: str | None = None,
    workload: str = "fixed",
) -> dict[str, Any]:
    """The base scenario turned into one variant, every file path made absolute.

    Args:
        base: The parsed experiment scenario (fused mode with ``scheduler.lanes``).
        base_dir: The folder of the scenario file (what its paths resolve against).
        variant: Which loop and which kind of replica.
        num_requests: Closed loop: requests in the table (``None``: the default cap).
        engine: The engine profile of every target pool (``None``: the scenario's).
        workload: A key of :data:`WORKLOADS` (``fixed``: the scenario's lengths).
    """
    doc = copy.deepcopy(dict(base))
    if engine is not None:
        for entry in doc["hardware_profiles"]:
            if entry.get("type") == "target":
                entry["engine"] = engine
    for keys in _PATH_LISTS:
        *head, field = keys
        node: Any = doc
        for key in head:
            node = node.get(key) if isinstance(node, dict) else None
        for item in node or []:
            item[field] = _absolute(base_dir, item[field])
    lanes = doc["scheduler"]["lanes"]
    for role in ("drafter", "verifier"):
        lanes[role]["lut"] = _absolute(base_dir, lanes[role]["lut"])
    synthetic = doc["workload"]["synthetic"]
    trace = WORKLOADS[workload]
    if trace is not None:
        for field in ("prompt_tokens", "output_tokens"):
            synthetic[field] = {"dist": "empirical", "trace": str(trace), "format": "azure"}
    if variant.loop == "closed":
        synthetic.pop("arrival", None)
        synthetic.pop("duration_s", None)
        synthetic["num_requests"] = num_requests or CLOSED_LOOP_REQUESTS
        doc["workload"]["closed_loop"] = {"users": 1, "think_time_s": 0}
    if variant.kind == "none":
        verifier = lanes["verifier"]
        doc["speculation"] = {
            "mode": "none",
            "verifier_models": [{"name": verifier["model"], "lut": verifier["lut"]}],
        }
    if variant.kind != "lanes":
        del doc["scheduler"]["lanes"]
        doc["scheduler"].pop("arbitration", None)
    doc["scenario_id"] = f"{doc.get('scenario_id', 'verify_pd')}_{variant.name}"
    return doc


def _scenario_engine(base: Mapping[str, Any]) -> str:
    """The engine profile the scenario's target pools run (the default when none is named)."""
    names = {
        str(entry.get("engine", DEFAULT_ENGINE))
        for entry in base["hardware_profiles"]
        if entry.get("type") == "target"
    }
    return ",".join(sorted(names))


def _kind(architecture: str) -> str:
    return "lanes" if architecture in LANE_ARCHITECTURES else architecture


def architecture_overrides(
    architecture: str,
    host_overhead_ms: float,
    overlap_efficiency: float | None,
    measured: bool = False,
) -> dict[str, Any]:
    """The scenario overrides that select a lane architecture and how its lanes run.

    The one place that maps an architecture name to scenario overrides.

    Args:
        architecture: A lane architecture (:data:`LANE_ARCHITECTURES`); ``engine`` and
            ``none`` are set by their variant's scenario and need no overrides.
        host_overhead_ms: Host time per model forward pass.
        overlap_efficiency: ``None``: ``gpu_sharing: serialized`` (or the measured
            overlap, below); otherwise ``gpu_sharing: overlap`` with this ``overlap_efficiency``.
        measured: Without an efficiency, ``gpu_sharing: overlap`` with the H100
            measurement (``pdv_unified``, one worker, stays serialized).
    """
    if architecture not in LANE_ARCHITECTURES:
        return {}
    overrides: dict[str, Any] = {
        "scheduler.arbitration.policy": architecture,
        "scheduler.lanes.host_overhead_ms": host_overhead_ms,
    }
    if overlap_efficiency is not None:
        overrides["scheduler.lanes.gpu_sharing"] = "overlap"
        overrides["scheduler.lanes.overlap_efficiency"] = overlap_efficiency
    elif measured and architecture != "pdv_unified":
        overrides["scheduler.lanes.gpu_sharing"] = "overlap"
    return overrides


def k_controller_overrides(architecture: str, k_controller: str) -> dict[str, Any]:
    """The scenario overrides that run a speculative point with a draft-length controller.

    Args:
        architecture: One of :data:`ARCHITECTURES`; ``none`` does not speculate and
            needs no overrides.
        k_controller: A k_control registry name; :data:`STATIC_K_CONTROLLER` keeps
            the scenario's fixed ``speculation.k`` (no overrides).

    Returns:
        ``speculation.adaptive_k`` enabled with the controller at its default
        parameters, bounded by :data:`K_MIN` .. :data:`K_MAX`.
    """
    if architecture == "none" or k_controller == STATIC_K_CONTROLLER:
        return {}
    return {
        "speculation.adaptive_k.enabled": True,
        "speculation.adaptive_k.controller": k_controller,
        "speculation.adaptive_k.k_min": K_MIN,
        "speculation.adaptive_k.k_max": K_MAX,
    }


def _points(
    architectures: Sequence[str],
    concurrency: Sequence[int],
    host_overheads: Sequence[float],
    loop: str,
    *,
    cut: bool,
    overlap_efficiencies: Sequence[float] = (),
    k_controller: str = STATIC_K_CONTROLLER,
    measured: bool = False,
) -> list[tuple[PointLabel, dict[str, Any]]]:
    points = []
    for arch in architectures:
        sharings: tuple[float | None, ...] = (None,)
        if arch in OVERLAP_ARCHITECTURES:
            sharings += tuple(overlap_efficiencies)
        for c in concurrency:
            for host in host_overheads if arch in LANE_ARCHITECTURES else (0.0,):
                for efficiency in sharings:
                    point: dict[str, Any] = {
                        "scheduler.max_running_requests": c,
                        "scheduler.verify.batching.max_batch": c,
                        "scheduler.prefill.batching.max_batch": c,
                        **architecture_overrides(arch, host, efficiency, measured),
                        **k_controller_overrides(arch, k_controller),
                    }
                    if loop == "open":
                        point["workload.synthetic.arrival.rate_per_s"] = RATE_PER_C * c
                    else:
                        point["workload.closed_loop.users"] = c
                    if not cut:
                        point["simulation.until_s"] = None
                    sharing = (
                        "measured"
                        if measured and efficiency is None and arch in OVERLAP_ARCHITECTURES
                        else "serialized"
                    )
                    points.append((PointLabel(arch, c, host, efficiency, sharing), point))
    return points


def accountings(requests: pd.DataFrame, run_s: float | None) -> dict[str, dict[str, float]]:
    """Both accountings of one run's ``requests.csv``.

    Args:
        requests: The run's requests (``arrival_s``, ``outcome``, ``output_tokens``,
            ``generated_tokens``, ``e2e_ms``).
        run_s: The cut (``simulation.until_s``); ``None``: the run went on until
            every request ended, and the span of the run is first arrival to last end.

    Returns:
        ``{"completed": {...}, "all": {...}}``, each with ``arrived``, ``completed``,
        ``unfinished``, ``throughput_tok_s``, ``mean_ms``, ``p95_ms``, ``p99_ms`` and the completed
        requests' TPOT percentiles ``tpot_p95_ms`` and ``tpot_p99_ms``.
    """
    arrived = len(requests)
    done = requests[requests["outcome"] == "completed"]
    completed = len(done)
    end_s = done["arrival_s"] + done["e2e_ms"] / 1000.0
    completed_span = float(end_s.max() - done["arrival_s"].min()) if completed else 0.0
    completed_tokens = float(done["output_tokens"].sum())
    completed_only = {
        "arrived": arrived,
        "completed": completed,
        "unfinished": arrived - completed,
        "throughput_tok_s": completed_tokens / completed_span if completed_span > 0 else math.nan,
        "mean_ms": float(done["e2e_ms"].mean()) if completed else math.nan,
        "p95_ms": _percentile(done["e2e_ms"], 95),
        "p99_ms": _percentile(done["e2e_ms"], 99),
    }
    # Decode latency per token: each completed request's mean time per output token
    # after the first (TPOT), in both accountings (an unfinished request has none).
    tpot = {
        "tpot_p95_ms": _percentile(done["tpot_ms"].dropna(), 95),
        "tpot_p99_ms": _percentile(done["tpot_ms"].dropna(), 99),
    }
    completed_only.update(tpot)
    open_ = requests[requests["outcome"] != "completed"]
    if run_s is None:
        span = float(end_s.max() - requests["arrival_s"].min()) if completed else 0.0
        ages = pd.Series([], dtype=float)
    else:
        span = run_s
        ages = (run_s - open_["arrival_s"]) * 1000.0
    latencies = pd.concat([done["e2e_ms"], ages], ignore_index=True)
    every = {
        "arrived": arrived,
        "completed": completed,
        "unfinished": arrived - completed,
        "throughput_tok_s": float(requests["generated_tokens"].sum()) / span
        if span > 0
        else math.nan,
        "mean_ms": float(latencies.mean()) if len(latencies) else math.nan,
        "p95_ms": _percentile(latencies, 95),
        "p99_ms": _percentile(latencies, 99),
        **tpot,
    }
    return {"completed": completed_only, "all": every}


def _percentile(values: pd.Series, q: float) -> float:
    return float(values.quantile(q / 100.0)) if len(values) else math.nan


def run_experiment(
    scenario: Path,
    out_dir: Path,
    *,
    architectures: Sequence[str],
    concurrency: Sequence[int],
    host_overheads: Sequence[float],
    loops: Sequence[str],
    sweep001: bool = False,
    overlap_efficiencies: Sequence[float] = (),
    k_controller: str = STATIC_K_CONTROLLER,
    engine: str | None = None,
    measured_sharing: bool = False,
    workload: str = "fixed",
    executor: str = "local",
    workers: int | None = None,
) -> pd.DataFrame:
    """Run every variant's sweep and return the results table (also written out).

    ``overlap_efficiencies`` adds, for every architecture of
    :data:`OVERLAP_ARCHITECTURES`, one point per efficiency with
    ``gpu_sharing: overlap`` beside its serialized point. ``k_controller`` (a
    k_control registry name) chooses the draft length of every speculative point.
    ``engine`` (a bundled engine profile name) runs every target pool, lanes or
    not, under that engine (``None``: the scenario's, by default ``cuda-graph``).
    ``measured_sharing`` runs the lanes of every point without an efficiency
    overlapped as the H100 measurement says (``gpu_sharing`` column ``measured``).
    ``workload`` (a key of :data:`WORKLOADS`) chooses the prompt and output lengths.
    """
    base = read_document(scenario, "scenario")
    engine_name = engine or _scenario_engine(base)
    run_s = None if sweep001 else float(base["simulation"]["until_s"])
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for loop in loops:
        for kind in ("lanes", "engine", "none"):
            archs = [a for a in architectures if _kind(a) == kind]
            if not archs:
                continue
            variant = Variant(f"{loop}_{kind}", loop, kind)
            doc = variant_document(
                base, scenario.parent, variant, 10 if sweep001 else None, engine, workload
            )
            if sweep001:
                doc["workload"]["synthetic"]["output_tokens"] = {"dist": "fixed", "value": 100}
            variant_dir = out_dir / "runs" / variant.name
            variant_dir.mkdir(parents=True, exist_ok=True)
            scenario_file = variant_dir / "scenario.yaml"
            scenario_file.write_text(yaml.safe_dump(doc, sort_keys=False))
            labelled = _points(
                archs,
                concurrency,
                host_overheads,
                loop,
                cut=not sweep001,
                overlap_efficiencies=overlap_efficiencies,
                k_controller=k_controller,
                measured=measured_sharing,
            )
            points = [point for _, point in labelled]
            table = simulator.sweep(
                {"sweep_id": variant.name, "scenario": str(scenario_file), "points": points},
                variant_dir / "sweep",
                executor=executor,
                workers=workers,
            )
            for (_, row), (label, _) in zip(table.iterrows(), labelled, strict=True):
                if row["status"] != "ok":
                    raise RuntimeError(f"{variant.name} point {row['point']}: {row['error']}")
                run_dir = variant_dir / "sweep" / row["run_dir"]
                requests = pd.read_csv(run_dir / "requests.csv")
                resources = json.loads((run_dir / "summary.json").read_text())["resources"]
                gpu = {
                    name: math.nan if resources[name] is None else resources[name]
                    for name in RESOURCE_COLUMNS
                }
                overlap = label.overlap_efficiency is not None
                for accounting, figures in accountings(requests, run_s).items():
                    rows.append(
                        {
                            "architecture": label.architecture,
                            "concurrency": label.concurrency,
                            "host_overhead": label.host_overhead,
                            "loop": loop,
                            "accounting": accounting,
                            **figures,
                            "gpu_sharing": "overlap" if overlap else label.gpu_sharing,
                            "overlap_efficiency": label.overlap_efficiency if overlap else math.nan,
                            "k_controller": k_controller
                            if label.architecture != "none"
                            else STATIC_K_CONTROLLER,
                            "engine": engine_name,
                            "workload": workload,
                            **gpu,
                        }
                    )
    frame: pd.DataFrame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    write_outputs(frame, out_dir)
    return frame


def write_outputs(frame: pd.DataFrame, out_dir: Path) -> None:
    """Write ``results.csv``, ``results.md`` and the figures.

    ``throughput.png`` and ``p95.png`` show the points without an efficiency
    (serialized, or the measured sharing); when the frame has overlap points,
    ``overlap.png`` shows them against the efficiency.
    """
    frame.to_csv(out_dir / "results.csv", index=False, float_format="%.6g", lineterminator="\n")
    (out_dir / "results.md").write_text(markdown_table(frame))
    if (frame["gpu_sharing"] == "overlap").any():
        plot_overlap(frame).savefig(out_dir / "overlap.png", dpi=110)
        plt.close("all")
    serialized = frame[frame["gpu_sharing"] != "overlap"]
    for metric, name in (("throughput_tok_s", "throughput"), ("p95_ms", "p95")):
        panels = serialized.groupby(["loop", "host_overhead", "accounting"], sort=True)
        rows = serialized["loop"].nunique()
        cols = -(-panels.ngroups // rows)
        fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.8 * rows), squeeze=False)
        for ax, ((loop, host, accounting), part) in zip(axes.flat, panels, strict=False):
            plot_metric(part, metric, ax=ax)
            ax.set_title(f"{loop} loop, host {host:g} ms, {accounting}")
        fig.tight_layout()
        fig.savefig(out_dir / f"{name}.png", dpi=110)
        plt.close(fig)


def plot_metric(frame: pd.DataFrame, metric: str, ax: Axes | None = None) -> Axes:
    """One line per architecture: ``metric`` against C (log-scaled axes).

    Args:
        frame: Rows of ``results.csv`` for one loop, host overhead and accounting.
        metric: ``throughput_tok_s``, ``p95_ms`` or ``p99_ms``.
        ax: Where to draw (default: a new figure's axes).
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.8))
    for arch, part in frame.groupby("architecture", sort=True):
        part = part.sort_values("concurrency")
        colour = f"C{ARCHITECTURES.index(str(arch))}" if arch in ARCHITECTURES else None
        ax.plot(part["concurrency"], part[metric], marker="o", label=str(arch), color=colour)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("C (batch size; open loop: 0.05 x C requests/s)")
    ax.set_ylabel({"throughput_tok_s": "tokens/s"}.get(metric, metric.replace("_", " ")))
    ax.legend(fontsize=7)
    return ax


def plot_overlap(frame: pd.DataFrame) -> Any:
    """Throughput (``all`` accounting) against ``overlap_efficiency``, one panel per C.

    One panel row per loop and host overhead. Each overlapping architecture is a
    line over the efficiencies, its serialized figure a dashed line of the same
    colour; ``engine`` (no lanes), where present, a dotted black line.

    Returns:
        The matplotlib figure.
    """
    every = frame[frame["accounting"] == "all"]
    groups = every.groupby(["loop", "host_overhead"], sort=True)
    levels = sorted(every["concurrency"].unique())
    fig, axes = plt.subplots(
        groups.ngroups,
        len(levels),
        figsize=(3.6 * len(levels), 3.4 * groups.ngroups),
        squeeze=False,
    )
    for row_axes, ((loop, host), part) in zip(axes, groups, strict=True):
        for ax, c in zip(row_axes, levels, strict=True):
            at_c = part[part["concurrency"] == c]
            for arch, lines in at_c.groupby("architecture", sort=True):
                colour = f"C{ARCHITECTURES.index(str(arch))}"
                overlap = lines[lines["gpu_sharing"] == "overlap"].sort_values("overlap_efficiency")
                serial = lines[lines["gpu_sharing"] == "serialized"]["throughput_tok_s"]
                if arch == "engine":
                    for value in serial:
                        ax.axhline(value, color="black", linestyle=":", label="engine")
                    continue
                if len(overlap):
                    ax.plot(
                        overlap["overlap_efficiency"],
                        overlap["throughput_tok_s"],
                        marker="o",
                        color=colour,
                        label=f"{arch} overlap",
                    )
                for value in serial:
                    ax.axhline(value, color=colour, linestyle="--", label=f"{arch} serialized")
            ax.set_title(f"C = {c}, {loop} loop, host {host:g} ms", fontsize=9)
            ax.set_xlabel("overlap_efficiency (configuration)")
            ax.set_ylabel("tokens/s (all)")
            ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def markdown_table(frame: pd.DataFrame) -> str:
    """``results.csv`` as a markdown table (an empty cell where a figure is NaN)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for record in frame.itertuples(index=False):
        cells = [
            ("" if math.isnan(v) else f"{v:.4g}") if isinstance(v, float) else str(v)
            for v in record
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _overlap_efficiencies(parser: argparse.ArgumentParser, text: str | None) -> tuple[float, ...]:
    """``--overlap``'s efficiencies, checked against the scenario schema's bounds."""
    if text is None:
        return ()
    schema = load_packaged_schema("scenario.schema.json")
    lanes = schema["properties"]["scheduler"]["properties"]["lanes"]["properties"]
    bounds = lanes["overlap_efficiency"]
    low, high = float(bounds["minimum"]), float(bounds["maximum"])
    values: list[float] = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not low <= value <= high:
            parser.error(
                f"--overlap: bad value {item!r}; allowed: comma-separated numbers "
                f"{', '.join(bounds_text(bounds))} (scheduler.lanes.overlap_efficiency)"
            )
        values.append(value)
    return tuple(dict.fromkeys(values))


def _concurrency(parser: argparse.ArgumentParser, text: str) -> tuple[int, ...]:
    """``--concurrency``'s levels: positive integers."""
    levels: list[int] = []
    for item in text.split(","):
        try:
            level = int(item)
        except ValueError:
            level = 0
        if level < 1:
            parser.error(
                f"--concurrency: bad value {item!r}; allowed: comma-separated integers >= 1"
            )
        levels.append(level)
    return tuple(dict.fromkeys(levels))


def _k_controller(parser: argparse.ArgumentParser, name: str) -> str:
    """``--k-controller``'s name, checked against the k_control registry."""
    names = policies.registry("k_control").names()
    if name not in names:
        parser.error(
            f"--k-controller: unknown controller {name!r}; allowed: {', '.join(sorted(names))} "
            "(speculation.adaptive_k.controller)"
        )
    return name


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO)
    parser.add_argument("-o", "--output", type=Path, default=Path("results/verify_pd"))
    parser.add_argument("--reduced", action="store_true", help="C in {1, 8}; pd and pdv")
    parser.add_argument("--sweep001", action="store_true", help="the smaller sweep (C 1..10)")
    parser.add_argument(
        "--host-overhead-ms",
        type=float,
        default=None,
        help=f"the second host overhead beside 0 ms (default {DOCUMENTS_HOST_OVERHEAD_MS:g}; "
        "with --overlap, 0 ms only unless given)",
    )
    parser.add_argument(
        "--loops", default=None, help="open, closed or both (default both; --overlap: closed)"
    )
    parser.add_argument(
        "--architectures",
        default=None,
        help=f"default all; --overlap: {','.join(OVERLAP_SWEEP_ARCHITECTURES)}",
    )
    parser.add_argument(
        "--overlap",
        default=None,
        metavar="E,E,...",
        help="overlap sensitivity sweep: beside its serialized point, each architecture of "
        f"{', '.join(OVERLAP_ARCHITECTURES)} runs with gpu_sharing: overlap at each "
        f"overlap_efficiency E; C in {OVERLAP_CONCURRENCY} unless --reduced",
    )
    parser.add_argument(
        "--concurrency",
        default=None,
        metavar="C,C,...",
        help="the levels of C (default: the documents' sweep; overrides --reduced's)",
    )
    parser.add_argument(
        "--k-controller",
        default=STATIC_K_CONTROLLER,
        metavar="NAME",
        help="k_control controller of every speculative point, default parameters, "
        f"k in {K_MIN}..{K_MAX} from speculation.k (default: {STATIC_K_CONTROLLER}, "
        "the scenario's fixed k)",
    )
    parser.add_argument(
        "--engine",
        choices=BUNDLED_ENGINES,
        default=None,
        help="engine profile of every target pool (default: the scenario's); eager-pytorch "
        "runs the documents' own engine, every forward pass launched from Python",
    )
    parser.add_argument(
        "--gpu-sharing",
        choices=("serialized", "measured"),
        default="serialized",
        help="how lanes share the GPU at points without an --overlap efficiency: one iteration "
        "at a time, or overlapped as two CUDA streams measured on an H100",
    )
    parser.add_argument(
        "--workload",
        choices=tuple(WORKLOADS),
        default="fixed",
        help="prompt and output lengths: the scenario's (fixed), or resampled from the Azure "
        "conversation trace (azure_conv, a mixed workload)",
    )
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv)
    if args.sweep001 and args.workload != "fixed":
        parser.error("--sweep001 fixes its own lengths; --workload applies to the main sweep")
    efficiencies = _overlap_efficiencies(parser, args.overlap)
    k_controller = _k_controller(parser, args.k_controller)
    overlap = args.overlap is not None
    default_architectures = OVERLAP_SWEEP_ARCHITECTURES if overlap else ARCHITECTURES
    architectures = (args.architectures or ",".join(default_architectures)).split(",")
    unknown = sorted(set(architectures) - set(ARCHITECTURES))
    if unknown:
        parser.error(f"unknown architectures {unknown}; allowed: {', '.join(ARCHITECTURES)}")
    concurrency: Sequence[int] = CONCURRENCY_001 if args.sweep001 else CONCURRENCY
    if overlap and not args.sweep001:
        concurrency = OVERLAP_CONCURRENCY
    loops = (args.loops or ("closed" if overlap else "open,closed")).split(",")
    if args.sweep001:
        loops = ["closed"]
    if args.reduced:
        architectures = list(REDUCED_ARCHITECTURES)
        concurrency = REDUCED_CONCURRENCY
    if args.concurrency is not None:
        concurrency = _concurrency(parser, args.concurrency)
    host_overheads: tuple[float, ...] = (0.0, DOCUMENTS_HOST_OVERHEAD_MS)
    if args.host_overhead_ms is not None:
        host_overheads = tuple(dict.fromkeys((0.0, args.host_overhead_ms)))
    elif overlap:
        host_overheads = (0.0,)
    frame = run_experiment(
        args.scenario,
        args.output,
        architectures=architectures,
        concurrency=concurrency,
        host_overheads=host_overheads,
        loops=loops,
        sweep001=args.sweep001,
        overlap_efficiencies=efficiencies,
        k_controller=k_controller,
        engine=args.engine,
        measured_sharing=args.gpu_sharing == "measured",
        workload=args.workload,
        executor=args.executor,
        workers=args.workers,
    )
    print(f"{len(frame)} rows in {args.output / 'results.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
