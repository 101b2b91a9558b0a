"""Run a prefix-caching example with and without the cache and print what changed.

Usage::

    python scripts/prefix_cache_example.py [--scenario mooncake|sessions] [--set KEY=VALUE ...]

Runs ``scenarios/prefix_cache/mooncake_llama31_8b_h100.yaml`` (the Mooncake
conversation trace's first 600 requests, with their block ids; the default)
or ``scenarios/prefix_cache/sessions_llama31_8b_h100.yaml`` (synthetic
multi-turn sessions) as :data:`VARIANTS` say: the prefix cache off, on with the scenario's routing
(``least_outstanding``), and on with ``cache_aware`` routing. Prints one row
per variant (markdown): TTFT p50 and p99, SLO attainment, goodput, GPU-hours,
token hit rate and prefill tokens saved, then the hit rate one cache that
never evicts would reach. ``--set`` overrides apply to every variant. The figures in ``scenarios/prefix_cache/README.md`` are its output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator import load_scenario, run  # noqa: E402
from simulator.cli_support import run_guarded  # noqa: E402
from simulator.rng import RandomStreams  # noqa: E402
from simulator.workload import RequestTable  # noqa: E402
from simulator.workload.generate import generate_requests  # noqa: E402

SCENARIOS = {
    "mooncake": ROOT / "scenarios" / "prefix_cache" / "mooncake_llama31_8b_h100.yaml",
    "sessions": ROOT / "scenarios" / "prefix_cache" / "sessions_llama31_8b_h100.yaml",
}
"""``--scenario`` name -> scenario file."""

VARIANTS: dict[str, list[str]] = {
    "cache off, least_outstanding": [],
    "cache on, least_outstanding": ["scheduler.kv.prefix_cache.enabled=true"],
    "cache on, cache_aware": [
        "scheduler.kv.prefix_cache.enabled=true",
        "scheduler.routing.policy=cache_aware",
    ],
}
"""Variant label -> its overrides of the scenario."""


def row(label: str, summary: dict[str, Any]) -> str:
    """One markdown table row of a run's figures."""
    ttft = summary["latency_ms"]["ttft"]
    goodput = summary["goodput"]
    cache = summary.get("prefix_cache")
    hit = f"{cache['token_hit_rate']:.1%}" if cache else "-"
    saved = f"{cache['prefill_tokens_saved']:,}" if cache else "-"
    return (
        f"| {label} | {ttft['p50']:,.0f} | {ttft['p99']:,.0f} | "
        f"{goodput['slo_attainment']:.1%} | {goodput['requests_per_s']:.3f} | "
        f"{summary['resources']['gpu_hours']:.4f} | {hit} | {saved} |"
    )


def unbounded_hit_rate(table: RequestTable, block_tokens: int) -> float:
    """Token hit rate of one cache that never evicts, seeing every request in arrival order.

    The same lookup rule as the replicas' caches (leading full blocks, at most
    ``(prompt_tokens - 1) // block_tokens``), no capacity limit, and a
    request's blocks cached as soon as it arrives: the most any routing and
    KV budget could find.
    """
    seen: set[tuple[int, ...]] = set()
    hit = 0
    prompts = 0
    prefixes = table.prefixes(block_tokens)
    for rid, prompt in zip(table.request_id.tolist(), table.prompt_tokens.tolist(), strict=True):
        ids = prefixes.get(rid, ())
        usable = min(len(ids), (prompt - 1) // block_tokens)
        found = 0
        while found < usable and ids[: found + 1] in seen:
            found += 1
        hit += found * block_tokens
        prompts += prompt
        for n in range(1, min(len(ids), prompt // block_tokens) + 1):
            seen.add(ids[:n])
    return hit / prompts if prompts else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="mooncake")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    print(
        "| variant | TTFT p50 ms | TTFT p99 ms | SLO attainment | goodput req/s | GPU-hours "
        "| token hit rate | prefill tokens saved |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, overrides in VARIANTS.items():
        scenario = load_scenario(SCENARIOS[args.scenario], [*overrides, *args.set])
        result = run(scenario)
        print(row(label, result.summary))
    cache = scenario.scheduler.prefix_cache
    assert cache is not None
    table = generate_requests(scenario.workload, (), RandomStreams(scenario.seed))
    bound = unbounded_hit_rate(table, cache.block_tokens)
    print(f"\nOne cache that never evicts would find {bound:.1%} of the prompt tokens.")
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
