"""Synthetic LUT files for tests.

The numbers here are not measurements: they come from :func:`analytic_values`,
a function that is linear in each of context_len, microbatch and fanout_k
separately (multilinear), so trilinear interpolation of a grid sampled from it
reproduces it exactly anywhere inside the grid, and linear extrapolation along
an axis reproduces it outside. Tests can therefore compare lookups with a
known truth.

Typical use::

    path = write_lut(tmp_path / "t.csv", phases=("prefill", "verify"))
    rows = grid_rows(); rows[3]["latency_ms"] = "fast"; write_rows(tmp_path / "bad.csv", rows)
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from simulator.lut import column_names

COLUMNS: tuple[str, ...] = column_names()
"""Column order of the files written here (the schema's order)."""

CONTEXT_LENS: tuple[int, ...] = (128, 512, 2048)
MICROBATCHES: tuple[int, ...] = (1, 4, 16)
FANOUT_KS: tuple[int, ...] = (1, 2, 4)
SINGLE_FANOUT_PHASES = frozenset({"prefill", "draft_decode"})

Values = Callable[[float, float, float], Mapping[str, float]]


def analytic_latency_ms(context_len: float, microbatch: float, fanout_k: float) -> float:
    """A multilinear synthetic latency: exact under trilinear interpolation."""
    c, m, k = context_len, microbatch, fanout_k
    return 2.0 + 0.01 * c + 0.5 * m + 0.25 * k + 0.001 * c * m + 0.0005 * m * k + 1e-5 * c * m * k


def analytic_values(context_len: float, microbatch: float, fanout_k: float) -> dict[str, float]:
    """All four looked-up numbers of a synthetic grid point (each multilinear)."""
    c, m, k = context_len, microbatch, fanout_k
    latency = analytic_latency_ms(c, m, k)
    return {
        "latency_ms": latency,
        "energy_mj": 3.0 * latency + 1.0,
        "peak_mem_mb": 1000.0 + 0.5 * c * m + 2.0 * m * k,
        "kv_delta_mb": 0.001 * c + 0.5 * m * k,
    }


def grid_rows(
    *,
    phases: Iterable[str] = ("verify",),
    model: str = "llama-2-7b",
    hardware: str = "a100-sxm4-80gb",
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    dtype: str = "fp16",
    context_lens: Sequence[int] = CONTEXT_LENS,
    microbatches: Sequence[int] = MICROBATCHES,
    fanout_ks: Sequence[int] = FANOUT_KS,
    values: Values = analytic_values,
    source: str = "synthetic test grid",
) -> list[dict[str, object]]:
    """Rows of a complete grid per phase; prefill/draft_decode get fanout_k 1 only."""
    rows: list[dict[str, object]] = []
    for phase in phases:
        ks = (1,) if phase in SINGLE_FANOUT_PHASES else tuple(fanout_ks)
        for c in context_lens:
            for m in microbatches:
                for k in ks:
                    row: dict[str, object] = {
                        "phase": phase,
                        "model": model,
                        "hardware": hardware,
                        "tensor_parallel": tensor_parallel,
                        "pipeline_parallel": pipeline_parallel,
                        "context_len": c,
                        "microbatch": m,
                        "fanout_k": k,
                        "dtype": dtype,
                        "source": source,
                        "notes": "",
                    }
                    row.update(values(c, m, k))
                    rows.append(row)
    return rows


def write_rows(
    path: Path, rows: Iterable[Mapping[str, object]], columns: Sequence[str] = COLUMNS
) -> Path:
    """Write rows as CSV with the given header; keys a row lacks are written empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(name, "")) for name in columns])
    return path


def _cell(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def write_lut(
    path: Path, rows: Iterable[Mapping[str, object]] | None = None, **grid_spec: object
) -> Path:
    """Write a LUT CSV: the given rows, or a complete grid made by :func:`grid_rows`."""
    if rows is None:
        rows = grid_rows(**grid_spec)  # type: ignore[arg-type]
    return write_rows(path, rows)
