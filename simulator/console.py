"""The console table of a run's headline numbers."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def headline_table(summary: dict[str, Any]) -> str:
    """Return a small fixed-width table of the headline metrics of a summary."""
    req = summary["requests"]
    lat = summary["latency_ms"]
    spec = summary["speculation"]
    reasons = ", ".join(f"{k} {v}" for k, v in req["rejected_by_reason"].items())
    rejected = f"{req['rejected']} ({reasons})" if reasons else str(req["rejected"])
    lines = [
        f"scenario {summary['scenario_id']} (mode {summary['mode']}, seed {summary['seed']}, "
        f"{summary['simulated_s']:.1f} s simulated)",
        f"requests   arrived {req['arrived']}  completed {req['completed']}  "
        f"rejected {rejected}  unfinished {req['unfinished']}",
        f"{'latency (ms)':<12} {'mean':>9} {'p50':>9} {'p90':>9} {'p99':>9}",
    ]
    for name in ("ttft", "tpot", "tvt", "e2e"):
        row = lat[name]
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
    if spec["verify_steps"]:
        lines.append(
            f"speculation  acceptance {_fmt(spec['acceptance_rate'], '.3f')}  "
            f"tokens/verify {_fmt(spec['mean_tokens_per_verify'], '.2f')}  rounds {spec['verify_steps']}"
        )
    lines.append(energy_line(summary["energy"]))
    lines.append(cost_line(summary["cost"]))
    lines.append(f"GPU utilisation {_fmt(summary['resources']['gpu_utilization'], '.1%')}")
    return "\n".join(lines)


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
    return _covered(
        f"energy {_fmt(energy['j_per_output_token'], '.3f')} J/token",
        energy,
        [
            ("not measured", energy["not_measured"]),
            ("idle not measured", energy["idle_not_measured"]),
        ],
    )


def cost_line(cost: dict[str, Any]) -> str:
    """The cost line: $ per 1k tokens, the classes it covers and those without a price."""
    return _covered(
        f"cost {_fmt(cost['usd_per_1k_tokens'], '.4g')} $/1k tokens",
        cost,
        [("no price", cost["not_priced"])],
    )
