"""Generate every LUT file and the catalog, deterministically.

:func:`build_tables` prices every key of the plan (the composed files, then
those built from the H100 measurements, :mod:`lut_population.microbench`) on
its grid (refined, except for measured keys) and
returns the CSV text of each file; :func:`write_outputs` writes them (and
``lut/CATALOG.md``) and removes nothing else. Rows are sorted by key and grid
point and numbers are written with six significant digits in positional
notation, so the same inputs give byte-identical files.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lut_population.csv_format import COLUMNS, format_number, quote_cell
from lut_population.distserve_fit import distserve_plan
from lut_population.grid import Grid, evaluate_grid, refine
from lut_population.microbench import microbench_plan
from lut_population.phases import Metrics
from lut_population.plan import DTYPE, PIPELINE_PARALLEL, FileSpec, KeySpec, build_plan


@dataclass(frozen=True)
class BuiltKey:
    """One key after refinement.

    Attributes:
        spec: The key.
        grid: The refined grid.
        metrics: Costs on the grid, shaped (context, batch, k).
        over_memory: Number of grid points whose peak memory exceeds the replica's.
    """

    spec: KeySpec
    grid: Grid
    metrics: Metrics
    over_memory: int


@dataclass(frozen=True)
class BuiltFile:
    """One LUT file: its spec, keys and CSV text."""

    spec: FileSpec
    keys: tuple[BuiltKey, ...]
    text: str

    @property
    def rows(self) -> int:
        """Number of data rows."""
        return sum(k.grid.size for k in self.keys)


def _notes(
    metrics: Metrics, i: int, j: int, m: int, capacity: float | None, extra: str = ""
) -> str:
    notes = [extra] if extra else []
    peak = float(metrics.peak_mem_mb[i, j, m])
    if capacity is not None and peak > capacity:
        notes.append(f"exceeds memory: peak {peak:.0f} MiB > {capacity:.0f} MiB")
    if not metrics.energy_known:
        notes.append("energy not modelled: no power figure in the data")
    return "; ".join(notes)


def build_key(spec: KeySpec) -> BuiltKey:
    """Refine the key's grid and price it."""
    grid = refine(spec.cost, spec.grid) if spec.refine else spec.grid
    metrics = evaluate_grid(spec.cost, grid)
    capacity = spec.cost.capacity_mb
    over = 0 if capacity is None else int(np.sum(metrics.peak_mem_mb > capacity))
    return BuiltKey(spec, grid, metrics, over)


def _rows(key: BuiltKey) -> Iterable[tuple[tuple[object, ...], list[str]]]:
    spec = key.spec
    metrics = key.metrics
    extra = dict(spec.point_notes)
    for i, context in enumerate(key.grid.context):
        for j, batch in enumerate(key.grid.batch):
            for m, fanout in enumerate(key.grid.fanout_k):
                sort_key = (spec.phase, spec.tensor_parallel, context, batch, fanout)
                yield (
                    sort_key,
                    [
                        spec.phase,
                        spec.model,
                        spec.hardware,
                        str(spec.tensor_parallel),
                        str(PIPELINE_PARALLEL),
                        str(context),
                        str(batch),
                        str(fanout),
                        DTYPE,
                        format_number(metrics.latency_ms[i, j, m]),
                        format_number(metrics.peak_mem_mb[i, j, m]),
                        format_number(metrics.kv_delta_mb[i, j, m]),
                        format_number(metrics.energy_mj[i, j, m]),
                        spec.cost.source,
                        _notes(
                            metrics,
                            i,
                            j,
                            m,
                            spec.cost.capacity_mb,
                            extra.get((context, batch, fanout), ""),
                        ),
                    ],
                )


def render_csv(keys: Iterable[BuiltKey]) -> str:
    """CSV text of a file's keys, rows sorted by (phase, TP, context, batch, k)."""
    rows = sorted((row for key in keys for row in _rows(key)), key=lambda r: r[0])
    out = io.StringIO()
    out.write(",".join(COLUMNS) + "\n")
    for _, cells in rows:
        out.write(",".join(quote_cell(c) for c in cells) + "\n")
    return out.getvalue()


def full_plan() -> tuple[FileSpec, ...]:
    """The composed, measured and DistServe-fit files, in that order.

    See :func:`~lut_population.plan.build_plan`, :mod:`lut_population.microbench` and
    :mod:`lut_population.distserve_fit`.
    """
    return (*build_plan(), *microbench_plan(), *distserve_plan())


def build_tables(plan: tuple[FileSpec, ...] | None = None) -> tuple[BuiltFile, ...]:
    """Price every key of ``plan`` (default: :func:`full_plan`) and render each file."""
    files = []
    for spec in plan if plan is not None else full_plan():
        keys = tuple(build_key(k) for k in spec.keys)
        files.append(BuiltFile(spec, keys, render_csv(keys)))
    return tuple(files)


def write_outputs(files: tuple[BuiltFile, ...], catalog: str, lut_dir: Path) -> list[Path]:
    """Write the LUT files and the catalog into ``lut_dir``; return the written paths."""
    from lut_population.paths import CATALOG_NAME

    lut_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for built in files:
        path = lut_dir / built.spec.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(built.text, encoding="utf-8")
        written.append(path)
    path = lut_dir / CATALOG_NAME
    path.write_text(catalog, encoding="utf-8")
    written.append(path)
    return written
