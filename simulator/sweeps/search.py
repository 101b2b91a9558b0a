"""Capacity search: the highest arrival rate at which a scenario meets an SLO attainment.

Bisection on ``workload.arrival_scale``, as DistServe (per-GPU goodput at a
90% attainment target) and Vidur-Search (the highest QPS meeting the SLOs)
search for capacity. Bisection assumes attainment falls as the rate rises;
a scenario where it does not (e.g. admission control that rejects more at
lower rates) may pass at rates above the one reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simulator.capacity_bounds import DEFAULT_HIGH, DEFAULT_LOW, DEFAULT_TOLERANCE
from simulator.errors import InputError, make_issue
from simulator.limits import MAX_BISECTION_STEPS, MIN_SEARCH_TOLERANCE
from simulator.runner import run
from simulator.scenario.load import load_scenario
from simulator.sweeps.spec import override_text
from simulator.sweeps.table import target_gpus


@dataclass(frozen=True)
class Probe:
    """One run of the search.

    Attributes:
        arrival_scale: The ``workload.arrival_scale`` it ran at.
        offered_requests_per_s: Measured requests over the measured seconds.
        slo_attainment: The run's SLO attainment (``None``: no measured request).
        passed: Whether the attainment met the target.
        measured_requests: Requests in the run's measured set (the attainment's denominator).
        completed: Measured requests that completed.
        unfinished: Measured requests still running when the run stopped.
        rejected_by_reason: Measured requests rejected, per reason, by reason.
        slo_pass_rate: Per SLO (``ttft``, ``tpot``, ``tvt``), the share of the
            measured set within that target (``None``: it does not apply).
        goodput_requests_per_s: Requests meeting every SLO per second.
        goodput_requests_per_gpu_s: The same per GPU.
    """

    arrival_scale: float
    offered_requests_per_s: float
    slo_attainment: float | None
    passed: bool
    measured_requests: int = 0
    completed: int = 0
    unfinished: int = 0
    rejected_by_reason: tuple[tuple[str, int], ...] = ()
    slo_pass_rate: tuple[tuple[str, float | None], ...] = ()
    goodput_requests_per_s: float | None = None
    goodput_requests_per_gpu_s: float | None = None


@dataclass(frozen=True)
class CapacityResult:
    """The outcome of a capacity search.

    Attributes:
        target: The SLO attainment asked for.
        gpus: GPUs of the target replicas.
        best: The passing probe at the highest rate (``None``: even the lowest failed).
        probes: Every run, in the order run.
        capped: The highest scale passed, so the capacity may be higher still.
    """

    target: float
    gpus: int
    best: Probe | None
    probes: tuple[Probe, ...]
    capped: bool

    @property
    def requests_per_s(self) -> float | None:
        """The highest passing offered rate, in requests/s."""
        return self.best.offered_requests_per_s if self.best else None

    @property
    def requests_per_gpu_s(self) -> float | None:
        """The highest passing offered rate per GPU, in requests/s."""
        if self.best is None or not self.gpus:
            return None
        return self.best.offered_requests_per_s / self.gpus

    def describe(self) -> str:
        """One line stating the result."""
        if self.best is None:
            return (
                f"no rate meets SLO attainment {self.target:.1%}: "
                f"even arrival_scale {self.probes[0].arrival_scale:g} fails; "
                + attainment_limit(self.probes[0], self.target)
            )
        per_gpu = self.requests_per_gpu_s
        gpu_text = f"{per_gpu:.4g} requests/s per GPU ({self.gpus} GPUs)" if per_gpu else "no GPUs"
        capped = " (the highest scale tried: capacity may be higher)" if self.capped else ""
        return (
            f"capacity at SLO attainment {self.target:.1%}: arrival_scale {self.best.arrival_scale:.4g}, "
            f"{self.best.offered_requests_per_s:.4g} requests/s, {gpu_text}, "
            f"attainment {self.best.slo_attainment:.1%}{capped}"
        )


UNSERVABLE_REASONS = ("context_window", "device_kv_capacity", "kv_capacity")
"""Rejection reasons no arrival rate avoids: the request is too long for a model's
context window, or its KV cache can never fit its draft device or replica."""


def attainment_limit(probe: Probe, target: float) -> str:
    """What keeps a failing probe's attainment below ``target``.

    Rejections no rate avoids (:data:`UNSERVABLE_REASONS`) when they alone
    cap the attainment below the target; otherwise the probe's misses:
    rejections by reason, requests unfinished when the run stopped, and
    requests that completed outside an SLO (per SLO).
    """
    measured = probe.measured_requests
    if not measured:
        return "the run has no measured request"
    rejected = dict(probe.rejected_by_reason)
    unservable = {reason: n for reason, n in rejected.items() if reason in UNSERVABLE_REASONS}
    cap = 1.0 - sum(unservable.values()) / measured
    if unservable and cap < target:
        counts = " and ".join(f"{n} {reason}" for reason, n in unservable.items())
        plural = "s" if sum(unservable.values()) > 1 else ""
        return (
            f"{counts} rejection{plural} of {measured} measured requests "
            f"cap attainment at {cap:.1%} at any rate"
        )
    attained = probe.slo_attainment or 0.0
    misses = []
    if rejected:
        reasons = ", ".join(f"{reason} {n}" for reason, n in rejected.items())
        misses.append(f"{sum(rejected.values())} rejected ({reasons})")
    if probe.unfinished:
        misses.append(f"{probe.unfinished} unfinished when the run stopped")
    late = probe.completed - round(attained * measured)
    if late > 0:
        per_slo = [
            f"{name.upper()} {missed}"
            for name, rate in probe.slo_pass_rate
            if rate is not None and (missed := probe.completed - round(rate * measured)) > 0
        ]
        misses.append(f"{late} completed outside an SLO ({', '.join(per_slo)})")
    return f"there attainment is {attained:.1%}: of {measured} measured requests, " + ", ".join(
        misses
    )


def check_search(target: float, low: float, high: float, tolerance: float) -> None:
    """Refuse an attainment target outside (0, 1] or bad bounds (naming the option).

    The tolerance has a floor (:data:`~simulator.limits.MIN_SEARCH_TOLERANCE`)
    so that the bisection ends in a bounded number of probes.
    """
    issues = []
    if not 0 < target <= 1:
        issues.append(
            make_issue("command line", "--slo-attainment", target, "a fraction in (0, 1]")
        )
    if not (math.isfinite(low) and low > 0):
        issues.append(make_issue("command line", "--low", low, "a number > 0"))
    if not (math.isfinite(high) and high > low):
        issues.append(make_issue("command line", "--high", high, f"a number > --low ({low:g})"))
    if not (math.isfinite(tolerance) and tolerance >= MIN_SEARCH_TOLERANCE):
        issues.append(
            make_issue(
                "command line",
                "--tolerance",
                tolerance,
                f"a number >= {MIN_SEARCH_TOLERANCE:g} (a relative width; each probe is a run)",
            )
        )
    if issues:
        raise InputError(issues)


def capacity(
    scenario_file: str | Path,
    slo_attainment: float,
    *,
    overrides: Sequence[str] = (),
    seed: int | None = None,
    low: float = DEFAULT_LOW,
    high: float = DEFAULT_HIGH,
    tolerance: float = DEFAULT_TOLERANCE,
) -> CapacityResult:
    """Find the highest ``workload.arrival_scale`` whose run meets ``slo_attainment``.

    Runs ``low`` and ``high`` first; if ``low`` fails there is no capacity in
    range, if ``high`` passes it is reported (``capped``). Otherwise the
    interval is halved geometrically (rates span orders of magnitude) until
    the failing scale is at most ``1 + tolerance`` times the passing one, or
    after :data:`~simulator.limits.MAX_BISECTION_STEPS` halvings.

    Args:
        scenario_file: The scenario (open loop; its ``arrival_scale`` is replaced).
        slo_attainment: The fraction of measured requests that must meet their SLO.
        overrides: ``dotted.key=value`` overrides applied first.
        seed: Replaces the scenario's seed.
        low: Lowest scale tried.
        high: Highest scale tried.
        tolerance: Relative width at which bisection stops.

    Raises:
        InputError: A bad scenario or bad search parameters.
    """
    check_search(slo_attainment, low, high, tolerance)
    probes: list[Probe] = []
    gpus = 0

    def probe(scale: float) -> Probe:
        nonlocal gpus
        scenario = load_scenario(
            scenario_file,
            overrides=[*overrides, override_text("workload.arrival_scale", scale)],
            seed=seed,
        )
        gpus = target_gpus(scenario)
        summary = run(scenario).summary
        good = summary["goodput"]
        attained = good["slo_attainment"]
        requests = summary["requests"]
        offered = requests["measured"] / summary["measured_s"]
        found = Probe(
            scale,
            offered,
            attained,
            attained is not None and attained >= slo_attainment,
            requests["measured"],
            requests["completed"],
            requests["unfinished"],
            tuple(requests["rejected_by_reason"].items()),
            tuple((good.get("slo_pass_rate") or {}).items()),
            good["requests_per_s"],
            good["requests_per_gpu_s"],
        )
        probes.append(found)
        return found

    passing = probe(low)
    if not passing.passed:
        return CapacityResult(slo_attainment, gpus, None, tuple(probes), capped=False)
    top = probe(high)
    if top.passed:
        return CapacityResult(slo_attainment, gpus, top, tuple(probes), capped=True)
    failing_scale = high
    for _ in range(MAX_BISECTION_STEPS):
        if failing_scale <= passing.arrival_scale * (1 + tolerance):
            break
        middle = probe(math.sqrt(passing.arrival_scale * failing_scale))
        if middle.passed:
            passing = middle
        else:
            failing_scale = middle.arrival_scale
    return CapacityResult(slo_attainment, gpus, passing, tuple(probes), capped=False)
