"""DistServe's own simulator on the DistServe check's requests, beside this simulator.

Runs the configurations of :data:`PAIRS` with ``scripts/distserve_check.py``
(exporting the requests offered to each run), then runs DistServe's simulator
(``simdistserve/benchmarks/simulate_dist.py``) on exactly those request
streams, as shipped and with its per-iteration Ray overhead left out
(``Worker.add_ray_overhead`` returning 0), and prints, per configuration, the
attainment of both SLOs at every per-GPU rate from each, the per-GPU rate at
90 % attainment, and DistServe's rate over vLLM's as the paper's plot divides
them. The figures of ``scenarios/distserve_check/README.md``, "Against
DistServe's own simulator", are its output.

``--distserve`` names a checkout of LLMServe/DistServe (the README's figures:
commit ``82831f1``); its ``simdistserve`` package is imported from there, so
name only a checkout you trust. It needs simpy, numpy and pandas, which this
project installs.

Usage::

    python scripts/distserve_sim_compare.py --distserve PATH [--rates R,R,...]
        [--requests N] [--seed N]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import distserve_check as check  # noqa: E402

import simulator  # noqa: E402
from simulator.cli_support import integer_at_least, run_guarded  # noqa: E402

PAIRS: dict[str, list[str]] = {
    "vllm_1gpu_paged": ["--backend", "vllm", "--tp-prefill", "1"],
    "disaggregated_paged_tp2": ["--backend", "distserve", "--tp-prefill", "2", "--tp-decode", "1"],
    "disaggregated_paged": ["--backend", "distserve", "--tp-prefill", "1", "--tp-decode", "1"],
}
"""This check's configuration -> the same placement in DistServe's simulator's options."""

VLLM = "vllm_1gpu_paged"
DEFAULT_RATES = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)
SOURCES = ("DistServe's simulator", "... without its Ray overhead", "... this simulator")

Simulate = Callable[[Path, Sequence[str], bool], float]


def their_simulator(checkout: Path, ttft_ms: float, tpot_ms: float) -> Simulate:
    """A function running DistServe's simulator from ``checkout`` on one exported workload.

    It returns the fraction of requests meeting both SLOs (its ``both`` row);
    its third argument says whether the Ray overhead is kept.

    Raises:
        SystemExit: ``checkout`` has no ``simdistserve`` package.
    """
    if not (checkout / "simdistserve" / "benchmarks" / "simulate_dist.py").is_file():
        print(
            f"error: --distserve: no simdistserve/benchmarks/simulate_dist.py under it (got "
            f"'{checkout}'; allowed: a checkout of LLMServe/DistServe)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    sys.path.insert(0, str(checkout))
    try:
        simulate: ModuleType = importlib.import_module("simdistserve.benchmarks.simulate_dist")
        worker = importlib.import_module("simdistserve.base.worker").Worker
        for owner, name in (
            (simulate, "parse_args"),
            (simulate, "main"),
            (worker, "add_ray_overhead"),
        ):
            getattr(owner, name)  # what this script calls
    except (ImportError, AttributeError) as exc:
        print(
            f"error: --distserve: its simulator does not load as commit 82831f1's does (got "
            f"'{checkout}': {exc}; allowed: a checkout of LLMServe/DistServe with that "
            "simulator)",
            file=sys.stderr,
        )
        raise SystemExit(2) from None

    def run(workload: Path, backend: Sequence[str], ray: bool) -> float:
        count = len(json.loads(workload.read_text(encoding="utf-8")))
        args = simulate.parse_args(
            [
                *("--arrival", "custom", "--workload", str(workload), "--N", str(count)),
                *("--model", "opt_13b", "--prefill-target", f"{ttft_ms:g}"),
                *("--decode-target", f"{tpot_ms:g}", "--slo-scales", "[1.0]", "--slas", "[90]"),
                *backend,
            ]
        )
        kept = worker.add_ray_overhead
        if not ray:
            worker.add_ray_overhead = lambda self, tokens: 0
        outputs: dict[str, object] = {}
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                simulate.main(args, outputs)
        finally:
            worker.add_ray_overhead = kept
        frame = outputs["latency_df"]
        both = frame[frame["pd"] == "both"]["attainment"]  # type: ignore[index]
        return float(both.iloc[0]) / 100.0

    return run


def compare(
    theirs: Simulate,
    rates: Sequence[float],
    requests: int,
    seed: int | None,
    scratch: Path,
) -> dict[str, dict[str, list[float]]]:
    """Attainment by configuration and source (:data:`SOURCES`), one value per rate."""
    by_name = {c.name: c for c in check.SCENARIOS}
    out: dict[str, dict[str, list[float]]] = {}
    for name, backend in PAIRS.items():
        print(f"{name}: this simulator, then DistServe's on the same requests", file=sys.stderr)
        ours = check.run_configuration(
            by_name[name], rates, requests, scratch / "runs", None, seed, scratch / "requests"
        )
        files = [scratch / "requests" / name / f"rate_{rate:g}.json" for rate in rates]
        out[name] = {
            SOURCES[0]: [theirs(f, backend, True) for f in files],
            SOURCES[1]: [theirs(f, backend, False) for f in files],
            SOURCES[2]: [float(a) for a in ours["attainment"]],
        }
    return out


def report(rates: Sequence[float], table: dict[str, dict[str, list[float]]]) -> list[str]:
    """The markdown table and the ratio lines of :func:`compare`'s result."""
    head = " | ".join(f"{r:g}" for r in rates)
    lines = [
        f"| per-GPU rate (req/s) | {head} | rate at 90 % |",
        "|---|" + "---|" * (len(rates) + 1),
    ]
    crossings: dict[tuple[str, str], float | None] = {}
    for name, by_source in table.items():
        for source, attainment in by_source.items():
            crossing = check.rate_at(rates, attainment, check.TARGET_ATTAINMENT)
            crossings[(name, source)] = crossing
            cells = " | ".join(f"{100 * a:.1f} %" for a in attainment)
            label = f"{name}: {source}" if source == SOURCES[0] else source
            text = "-" if crossing is None else f"{crossing:.3f}"
            lines.append(f"| {label} | {cells} | {text} |")
    lines.append("")
    for name in table:
        if name == VLLM:
            continue
        for source in SOURCES:
            ours, base = crossings[(name, source)], crossings[(VLLM, source)]
            ratio = "-" if ours is None or base is None else f"{ours / base:.2f}x"
            lines.append(f"{name} over {VLLM}, {source.removeprefix('... ')}: {ratio}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run both simulators and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--distserve", type=Path, required=True, help="a DistServe checkout")
    parser.add_argument("--rates", type=check.rates_option, default=list(DEFAULT_RATES))
    parser.add_argument(
        "--requests", type=integer_at_least(1), default=3000, help="requests per run"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of every run")
    args = parser.parse_args(argv)
    rates: list[float] = args.rates
    vllm = next(c for c in check.SCENARIOS if c.name == VLLM)
    slo = simulator.load_scenario(ROOT / vllm.scenario).workload.slo_classes["default"]
    assert slo.ttft_ms is not None and slo.tpot_ms is not None
    theirs = their_simulator(args.distserve.resolve(), slo.ttft_ms, slo.tpot_ms)
    with tempfile.TemporaryDirectory() as scratch:
        table = compare(theirs, rates, args.requests, args.seed, Path(scratch))
    print("\n".join(report(rates, table)))
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
