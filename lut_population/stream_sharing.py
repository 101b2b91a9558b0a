"""GPU sharing of two CUDA streams, derived from the H100 stream-overlap measurements.

``python -m lut_population.stream_sharing [--check]`` reads the copy of
``inputs/microbench_h100/stream_overlap.csv`` and writes
``simulator/data/stream_sharing.json``, which the simulator reads when lanes
share a GPU (``scheduler.lanes.gpu_sharing: overlap`` without an
``overlap_efficiency``; :mod:`simulator.engine.gpu_share`). ``--check`` writes
nothing and exits 1 when the shipped file differs from what the data give.

What the file measured (``microbench_h100/README.md``): two streams, each
replaying one model pass in a loop, alone and then together on one H100 (context
1024). Stream A is the pass of smaller kernels (a draft model's decode step, or
the 7B decode at batch 32 against a prefill), stream B the larger (a 7B verify
of k = 4 at batch 1, 16 and 64, or a 7B prefill of 1024 tokens). The slowdown
of a stream is its time per pass together over alone. The small-kernel stream
is starved, 2.5-7.2x, while the large one keeps 0.6-0.9 of its speed; together
they finish about as fast as one after the other (``e_pair`` 0.49-0.57), and a
high-priority small stream changes nothing (the ``_prioA`` rows, machine B,
within 2 %).

The model: while a pass of each kind runs, each progresses at ``1 / s`` of its
speed alone, ``s`` read at ``rho`` = the large pass's time alone over the small
pass's (a kernel of the large stream holds the SMs the longer, the longer its
pass is against the small one's), linearly in ``log rho`` between the measured
points of that kind of large pass (``verify`` or ``prefill``) and constant
beyond them (an assumption: no pair outside the measured ratios was measured).
Each machine-A row is a point; the ``_prioA`` rows are the same pairs on
machine B and serve as a check. The derived file records, per point, the
leave-one-out error (the point predicted from the others of its kind, where it
lies between them) and the machine-B rows' errors against the model.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lut_population.derived_json import derive_main
from lut_population.paths import INPUTS_DIR
from lut_population.prepare import MICROBENCH_DIR
from simulator.engine.sharing import interpolate_log

SOURCE = INPUTS_DIR / MICROBENCH_DIR / "stream_overlap.csv"
OUTPUT = Path(__file__).resolve().parent.parent / "simulator" / "data" / "stream_sharing.json"
PRIORITY_SUFFIX = "_prioA"
"""Rows of the same pairs with the small stream at high priority (machine B)."""
KINDS = ("verify", "prefill")
"""Kinds of large pass the file measured against a small one."""


@dataclass(frozen=True)
class Pair:
    """One measured row: the two passes' times alone and their slowdowns together."""

    experiment: str
    kind: str
    small_ms: float
    large_ms: float
    small_slowdown: float
    large_slowdown: float
    e_pair: float

    @property
    def rho(self) -> float:
        """The large pass's time alone over the small pass's."""
        return self.large_ms / self.small_ms


def _kind(stream_b: str) -> str:
    for kind in KINDS:
        if kind in stream_b:
            return kind
    raise ValueError(f"{SOURCE.name}: stream_b {stream_b!r} is neither a verify nor a prefill")


def read_pairs(path: Path = SOURCE) -> list[Pair]:
    """Every row of the file as a :class:`Pair`."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [
            Pair(
                row["experiment"],
                _kind(row["stream_b"]),
                float(row["a_iter_alone_ms"]),
                float(row["b_iter_alone_ms"]),
                float(row["slowdown_a"]),
                float(row["slowdown_b"]),
                float(row["e_pair"]),
            )
            for row in csv.DictReader(handle)
        ]


def interpolate(points: Sequence[tuple[float, float]], rho: float) -> float:
    """The value at ``rho`` between sorted ``(rho, value)`` points, as the simulator reads it."""
    return interpolate_log([p[0] for p in points], [p[1] for p in points], rho)


def _points(pairs: Sequence[Pair], attribute: str) -> list[tuple[float, float]]:
    return sorted((pair.rho, float(getattr(pair, attribute))) for pair in pairs)


def derive(path: Path = SOURCE) -> dict[str, object]:
    """The content of ``stream_sharing.json``."""
    rows = read_pairs(path)
    fitted = [row for row in rows if not row.experiment.endswith(PRIORITY_SUFFIX)]
    checks = [row for row in rows if row.experiment.endswith(PRIORITY_SUFFIX)]
    kinds: dict[str, object] = {}
    for kind in KINDS:
        own = [row for row in fitted if row.kind == kind]
        kinds[kind] = {
            "rho": [round(p.rho, 4) for p in sorted(own, key=lambda p: p.rho)],
            "small_slowdown": [round(v, 4) for _, v in _points(own, "small_slowdown")],
            "large_slowdown": [round(v, 4) for _, v in _points(own, "large_slowdown")],
            "experiments": [p.experiment for p in sorted(own, key=lambda p: p.rho)],
        }
    leave_one_out: dict[str, dict[str, float]] = {}
    for row in fitted:
        others = [p for p in fitted if p.kind == row.kind and p is not row]
        rhos = [p.rho for p in others]
        if len(others) < 2 or not min(rhos) < row.rho < max(rhos):
            continue
        leave_one_out[row.experiment] = {
            attribute: round(
                interpolate(_points(others, attribute), row.rho) / getattr(row, attribute) - 1, 4
            )
            for attribute in ("small_slowdown", "large_slowdown")
        }
    machine_b: dict[str, dict[str, float]] = {}
    for row in checks:
        own = [p for p in fitted if p.kind == row.kind]
        machine_b[row.experiment] = {
            attribute: round(
                interpolate(_points(own, attribute), row.rho) / getattr(row, attribute) - 1, 4
            )
            for attribute in ("small_slowdown", "large_slowdown")
        }
    return {
        "derived_by": "python -m lut_population.stream_sharing",
        "source": "lut_population/inputs/microbench_h100/stream_overlap.csv (one H100 80GB "
        "HBM3, 2026-11-25; machine A rows fitted, machine B _prioA rows checked)",
        "model": "slowdown of each pass while a pass of the other kind runs, linear in log rho "
        "(large pass alone / small pass alone) between the points of the large pass's kind, "
        "constant beyond them",
        "kinds": kinds,
        "e_pair_range": [
            round(min(p.e_pair for p in rows), 4),
            round(max(p.e_pair for p in rows), 4),
        ],
        "leave_one_out_error": leave_one_out,
        "machine_b_error": machine_b,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Derive the constants; write them (or ``--check`` them against the shipped file)."""
    return derive_main(argv, __doc__.splitlines()[0], SOURCE, OUTPUT, derive)


if __name__ == "__main__":
    sys.exit(main())
