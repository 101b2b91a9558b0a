"""Benchmark the engine on standard workloads and record the figures.

Usage::

    python scripts/bench.py            # run every workload, print a table
    python scripts/bench.py --save     # ... and store the figures in scripts/bench_baseline.json
    python scripts/bench.py --only none_azure_conv_10k

Each workload runs in a fresh child process so its peak resident memory is
its own. Figures: wall seconds, simulated output tokens per wall-second,
verify rounds per wall-second, peak RSS. Targets (2-core machine):
``none_azure_conv_10k`` under 3 s wall, ``distributed_rounds`` at least
50,000 verify rounds per wall-second, ``none_synthetic_100k`` under 500 MB.
Timings are measurements, not tests: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "bench_baseline.json"
BENCH_SCENARIOS = ROOT / "scenarios" / "bench"

WORKLOADS: dict[str, dict[str, Any]] = {
    "none_azure_conv_10k": {
        "scenario": "none_azure_conv_10k.yaml",
        "overrides": [],
        "target": "wall_s < 3",
    },
    "distributed_rounds": {
        "scenario": "distributed_rounds.yaml",
        "overrides": [],
        "target": "verify_rounds_per_wall_s >= 50000",
    },
    "none_synthetic_100k": {
        "scenario": "none_synthetic_100k.yaml",
        "overrides": [],
        "target": "peak_rss_mb < 500",
    },
}


def _measure(name: str) -> dict[str, Any]:
    """Run one workload in this process and return its figures."""
    from simulator import load_scenario, run

    spec = WORKLOADS[name]
    scenario = load_scenario(BENCH_SCENARIOS / spec["scenario"], overrides=spec["overrides"])
    started = time.perf_counter()
    result = run(scenario)
    wall_s = time.perf_counter() - started
    summary = result.summary
    frame = result.requests
    tokens = int(frame["generated_tokens"].sum())
    rounds = int(summary["speculation"]["verify_steps"])
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "workload": name,
        "requests": len(frame),
        "completed": int(summary["requests"]["completed"]),
        "simulated_s": round(float(summary["simulated_s"]), 3),
        "wall_s": round(wall_s, 3),
        "output_tokens_per_wall_s": round(tokens / wall_s),
        "verify_rounds": rounds,
        "verify_rounds_per_wall_s": round(rounds / wall_s) if rounds else 0,
        "peak_rss_mb": round(peak_kb / 1024.0, 1),
        "target": spec["target"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", action="store_true", help="store the figures as the baseline")
    parser.add_argument("--only", choices=sorted(WORKLOADS), action="append", help="run only these")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.child)))
        return 0
    names = args.only or list(WORKLOADS)
    rows = []
    for name in names:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", name],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    header = f"{'workload':<22} {'requests':>9} {'wall s':>8} {'tok/wall s':>11} {'rounds/wall s':>14} {'peak MB':>8}  target"
    print(header)
    for row in rows:
        print(
            f"{row['workload']:<22} {row['requests']:>9} {row['wall_s']:>8.2f} "
            f"{row['output_tokens_per_wall_s']:>11,} {row['verify_rounds_per_wall_s']:>14,} "
            f"{row['peak_rss_mb']:>8.1f}  {row['target']}"
        )
    if args.save:
        baseline = {
            "machine": {
                "python": platform.python_version(),
                "processor": platform.machine(),
                "cpus": _cpus(),
            },
            "results": rows,
        }
        BASELINE.write_text(json.dumps(baseline, indent=2) + "\n")
        print(f"stored in {BASELINE.relative_to(ROOT)}")
    return 0


def _cpus() -> int:
    import os

    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    )


if __name__ == "__main__":
    sys.exit(main())
