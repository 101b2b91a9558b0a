"""``metadata``, ``metrics``, ``simulation`` and ``workload``: the run-level settings.

The workload's origins must name declared client classes.
"""

from __future__ import annotations

from simulator.errors import make_issue
from simulator.scenario.model import Metadata, MetricsSpec, SimulationSpec
from simulator.scenario.sections.context import BuildContext
from simulator.workload import TraceSource, WorkloadSpec, build_workload_spec
from simulator.workload.issue_collector import row_key


def build_metadata(ctx: BuildContext) -> Metadata:
    """Build the descriptive fields (the label defaults to the scenario id)."""
    meta = ctx.doc["metadata"]
    label = meta["label"] if meta["label"] else ctx.doc["scenario_id"]
    return Metadata(meta["description"], label, tuple(meta["references"]))


def build_metrics(ctx: BuildContext) -> MetricsSpec:
    """Build the recording settings."""
    raw = ctx.doc["metrics"]
    return MetricsSpec(
        raw["output_dir"],
        bool(raw["record_energy"]),
        bool(raw["record_cost"]),
        float(raw["timeseries_interval_s"]),
        float(raw["warmup_s"]),
        None if raw["electricity_usd_per_kwh"] is None else float(raw["electricity_usd_per_kwh"]),
    )


def build_simulation(ctx: BuildContext) -> SimulationSpec:
    """Build the run-control settings."""
    raw = ctx.doc["simulation"]
    until = raw["until_s"]
    return SimulationSpec(
        until_s=None if until is None else float(until),
        lut_out_of_range=raw["lut_out_of_range"],
        fuse_iterations=bool(raw["fuse_iterations"]),
        ragged_batches=str(raw["ragged_batches"]),
        step_noise=str(raw["step_noise"]),
    )


def build_workload(ctx: BuildContext, client_ids: list[str]) -> WorkloadSpec | None:
    """Build the workload; refuse origins that name no declared client class."""
    spec, issues = build_workload_spec(ctx.doc["workload"], ctx.file)
    ctx.issues.extend(issues)
    if spec is None:
        return None
    declared = "a hardware_profiles id of type draft: " + (
        ", ".join(client_ids) or "(none declared)"
    )
    problem = "origin names an undeclared client device class"
    trace = spec.source.trace if isinstance(spec.source, TraceSource) else None
    for name in sorted(spec.origin_names()):
        if name in client_ids:
            continue
        rows = trace.rows_with_origin(name) if trace is not None else []
        if trace is None or not rows:
            ctx.issue("workload.origin.weights", name, declared, problem)
            continue
        ctx.issues.append(
            make_issue(
                trace.path,
                row_key(rows[0], "origin"),
                name,
                f"{declared} (declared under hardware_profiles in {ctx.file})",
                f"{problem} ({len(rows)} row(s) name it; the first is listed)",
            )
        )
    return spec
