"""The console table of a run's headline numbers."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _run_name(summary: dict[str, Any]) -> str:
    label = summary.get("label")
    sid = summary["scenario_id"]
    return f"scenario {sid}" if not label or label == sid else f"{label} (scenario {sid})"


def headline_table(summary: dict[str, Any]) -> str:
    """Return a small fixed-width table of the headline metrics of a summary.

    The TVT latency row appears only for a run with TVT samples (verify
    rounds over a network: modes ``distributed`` and ``hybrid``).
    """
    req = summary["requests"]
    lat = summary["latency_ms"]
    spec = summary["speculation"]
    reasons = ", ".join(f"{k} {v}" for k, v in req["rejected_by_reason"].items())
    rejected = f"{req['rejected']} ({reasons})" if reasons else str(req["rejected"])
    lines = [
        f"{_run_name(summary)} (mode {summary['mode']}, seed {summary['seed']}, "
        f"{summary['simulated_s']:.1f} s simulated)",
        f"requests   arrived {req['arrived']}  completed {req['completed']}  "
        f"rejected {rejected}  unfinished {req['unfinished']}",
        f"{'latency (ms)':<12} {'mean':>9} {'p50':>9} {'p90':>9} {'p99':>9}",
    ]
    if req.get("stalled_at_s") is not None:
        lines.insert(
            2,
            f"warning: stalled at {req['stalled_at_s']:.3f} s: nothing was left to simulate with "
            f"{req['unfinished']} requests unfinished, each waiting for what another holds "
            "(SCENARIO.md, 'A stalled run')",
        )
    for name in ("ttft", "tpot", "tvt", "e2e"):
        row = lat[name]
        if name == "tvt" and row["mean"] is None:
            continue  # no verify round over a network: TVT does not apply
        lines.append(
            f"{name.upper():<12} {_fmt(row['mean']):>9} {_fmt(row['p50']):>9} "
            f"{_fmt(row['p90']):>9} {_fmt(row['p99']):>9}"
        )
    good = summary["goodput"]
    lines.append(
        f"throughput {summary['throughput']['output_tokens_per_s']:.1f} tok/s  "
        f"{summary['throughput']['requests_per_s']:.3f} req/s   "
        f"goodput {_fmt(good['requests_per_s'], '.3f')} req/s "
        f"(SLO attainment {_fmt(good['slo_attainment'], '.1%')})"
    )
    lines += slo_lines(good)
    if spec["verify_steps"]:
        lines.append(
            f"speculation  acceptance {_fmt(spec['acceptance_rate'], '.3f')}  "
            f"tokens/verify {_fmt(spec['mean_tokens_per_verify'], '.2f')}  rounds {spec['verify_steps']}"
        )
    lines.append(energy_line(summary["energy"]))
    lines.append(cost_line(summary["cost"]))
    lines.append(f"GPU utilisation {_fmt(summary['resources']['gpu_utilization'], '.1%')}")
    return "\n".join(lines)


SLO_NAMES = ("ttft", "tpot", "tvt")


def _target(value: float | None) -> str:
    return "no target" if value is None else f"<= {value:g} ms"


def slo_lines(goodput: dict[str, Any]) -> list[str]:
    """Each SLO's target (per class) and pass rate beside the overall attainment.

    Rates share the attainment's denominator (every measured request); TVT
    reads "does not apply" where the run has no TVT target or no network rounds.
    """
    targets = goodput.get("slo_targets_ms") or {}
    rates = goodput.get("slo_pass_rate") or {}
    lines = [
        f"{'SLO':<12} {'target':>12} {'pass rate':>10}   "
        f"(of {goodput['measured_requests']} measured requests)"
    ]
    default = targets.get("default", {})
    for name in SLO_NAMES:
        rate = rates.get(name)
        shown = _fmt(rate, ".1%") if rate is not None or name != "tvt" else "does not apply"
        lines.append(f"{name.upper():<12} {_target(default.get(f'{name}_ms')):>12} {shown:>10}")
    lines.append(
        f"{'all':<12} {'':>12} {_fmt(goodput['slo_attainment'], '.1%'):>10}   (SLO attainment)"
    )
    for cls, limits in targets.items():
        if cls != "default":
            within = ", ".join(f"{n.upper()} {_target(limits.get(f'{n}_ms'))}" for n in SLO_NAMES)
            lines.append(f"  class {cls}: {within}")
    return lines


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def _covered(head: str, section: dict[str, Any], gaps: list[tuple[str, list[str]]]) -> str:
    """``head``, the device classes a total covers, then each labelled list of gaps."""
    line = head
    if section["by_device_class"]:
        line += f" (covers {_names(section['covers'])})"
    for label, names in gaps:
        if names:
            line += f"   {label}: {_names(names)}"
    return line


def energy_line(energy: dict[str, Any]) -> str:
    """The energy line: J per output token, the classes it covers and those not measured."""
    per_token = energy["j_per_output_token"]
    head = "energy not measured" if per_token is None else f"energy {per_token:.3f} J/token"
    return _covered(
        head,
        energy,
        [
            ("not measured", energy["not_measured"]),
            ("idle not measured", energy["idle_not_measured"]),
        ],
    )


def cost_line(cost: dict[str, Any]) -> str:
    """The cost line: $ per 1k tokens, the classes it covers and those without a price."""
    per_1k = cost["usd_per_1k_tokens"]
    head = "cost: no price" if per_1k is None else f"cost {per_1k:.4g} $/1k tokens"
    return _covered(
        head,
        cost,
        [("no price", cost["not_priced"])],
    )
