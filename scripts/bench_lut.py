"""Measure LUT lookup speed: lookups per second with and without the lookup cache.

Writes a synthetic LUT (numbers from a made-up formula, for timing only) to a
temporary directory, loads it and times :meth:`LutManager.lookup` for

* uncached queries: every query distinct (fractional context lengths), so each
  one is interpolated;
* cached queries: a small set of queries repeated, as a simulation with
  steady batches produces;
* exact grid points without the cache (the cheapest interpolation).

Usage::

    python scripts/bench_lut.py [--lookups 200000] [--seed 0]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from simulator.cli_support import integer_at_least
from simulator.lut import LutKey, LutManager, column_names, load_lut

CONTEXT_LENS = (128, 256, 512, 1024, 2048, 4096, 8192)
MICROBATCHES = (1, 2, 4, 8, 16, 32, 64)
FANOUT_KS = (1, 2, 3, 4, 5, 6, 7, 8)
KEY = LutKey("verify", "bench-model", "bench-hardware", 1, 1, "fp16")


def write_synthetic(path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        # Required columns only; the optional source and notes are left out.
        writer.writerow(column_names()[:-2])
        for c, m, k in itertools.product(CONTEXT_LENS, MICROBATCHES, FANOUT_KS):
            latency = 1.0 + c * m * k / 1e5
            writer.writerow(
                [
                    KEY.phase,
                    KEY.model,
                    KEY.hardware,
                    KEY.tensor_parallel,
                    KEY.pipeline_parallel,
                    c,
                    m,
                    k,
                    KEY.dtype,
                    latency,
                    c * m,
                    m * k,
                    2 * latency,
                ]
            )


def rate(run: Callable[[], None], count: int) -> float:
    start = time.perf_counter()
    run()
    return count / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lookups", type=integer_at_least(1), default=200_000, help="lookups per measurement"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the query generator")
    args = parser.parse_args(argv)
    count = args.lookups
    rng = np.random.default_rng(args.seed)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.csv"
        write_synthetic(path)
        start = time.perf_counter()
        table = load_lut(path, use_cache=False)
        load_s = time.perf_counter() - start
    manager = LutManager([table])
    lookup = manager.lookup

    contexts = rng.uniform(CONTEXT_LENS[0], CONTEXT_LENS[-1], count).tolist()
    batches = rng.integers(1, MICROBATCHES[-1] + 1, count).tolist()
    fanouts = rng.integers(1, FANOUT_KS[-1] + 1, count).tolist()
    queries = list(zip(contexts, batches, fanouts, strict=True))
    repeated = queries[:64] * (count // 64)
    points = list(itertools.product(CONTEXT_LENS, MICROBATCHES, FANOUT_KS))
    exact = [(float(c), m, k) for c, m, k in points] * max(1, count // len(points))

    def run_all(items: list[tuple[float, int, int]]) -> Callable[[], None]:
        def run() -> None:
            for c, m, k in items:
                lookup(KEY, c, m, k)

        return run

    table.clear_cache()
    uncached = rate(run_all(queries), len(queries))
    table.clear_cache()
    run_all(repeated[:64])()
    cached = rate(run_all(repeated), len(repeated))
    table.clear_cache()
    grid_points = rate(run_all(exact), len(exact))
    hits, misses, size = table.cache_info()

    print(f"LUT: {table.row_count} rows, loaded in {load_s * 1000:.1f} ms")
    print(f"uncached lookups (distinct interior points): {uncached:,.0f} per second")
    print(f"cached lookups (64 queries repeated):        {cached:,.0f} per second")
    print(f"grid-point lookups (each point once uncached): {grid_points:,.0f} per second")
    print(f"cache after the last run: {hits} hits, {misses} misses, {size} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
