"""Average GPU power while serving, as a function of the work in one iteration.

Datacenter GPUs use ML.ENERGY's measured power against batch size
(:func:`lut_population.inputs.load_power_points`): v3 ``avg_power_W`` for
H100, v2 energy-per-token x throughput for A100 (measured on A100-SXM4-40GB;
the 80 GB part is not in the data, and on H100 the same v2 arithmetic gives
about half of v3's measured power, so the A100 figures are likely low). The
reference run is Llama-3.1-70B for models above 20 B parameters and
Llama-3.1-8B otherwise (the measured models closest in size).

An iteration that processes ``n`` new tokens is given the measured power at
batch size ``n`` (decode runs process one token per sequence), interpolated
linearly in log(batch) between the measured points and held at the end
points outside them (a prefill of thousands of tokens gets the power of the
largest measured batch). Power is per GPU; a replica draws it on each of its
GPUs. Idle power is not in the data and is not included: LUT energy is the
energy of busy iterations only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.inputs import PowerPoint, load_power_points

LARGE_MODEL_PARAMS = 20e9
"""Models above this size use the 70B reference run."""

REFERENCE_RUNS = {
    "a100": {
        "small": ("meta-llama/Meta-Llama-3.1-8B-Instruct", 1),
        "large": ("meta-llama/Meta-Llama-3.1-70B-Instruct", 8),
    },
    "h100": {
        "small": ("meta-llama/Llama-3.1-8B-Instruct", 1),
        "large": ("meta-llama/Llama-3.1-70B-Instruct", 4),
    },
}
"""(model, tensor parallel) of the ML.ENERGY run used per GPU and size class."""


@dataclass(frozen=True)
class PowerCurve:
    """Per-GPU power against tokens per iteration, from one measured sweep.

    Attributes:
        gpu: ``a100`` or ``h100``.
        model: The measured checkpoint.
        tensor_parallel: TP degree of the measured run.
        batch: Measured average batch sizes, ascending.
        power_w: Measured per-GPU power at each batch size.
        references: Where each point comes from.
    """

    gpu: str
    model: str
    tensor_parallel: int
    batch: tuple[float, ...]
    power_w: tuple[float, ...]
    references: tuple[str, ...]

    def power_w_per_gpu(self, tokens: FloatArray) -> FloatArray:
        """Per-GPU power of an iteration processing ``tokens`` new tokens."""
        x = np.log(np.maximum(np.asarray(tokens, dtype=np.float64), 1.0))
        return np.asarray(np.interp(x, np.log(np.asarray(self.batch)), np.asarray(self.power_w)))


def _curve(points: tuple[PowerPoint, ...], gpu: str, model: str, tp: int) -> PowerCurve:
    chosen = sorted(
        (p for p in points if p.gpu == gpu and p.model == model and p.tensor_parallel == tp),
        key=lambda p: p.batch,
    )
    if not chosen:
        raise LookupError(f"no ML.ENERGY rows for {model} at TP {tp} on {gpu}")
    return PowerCurve(
        gpu=gpu,
        model=model,
        tensor_parallel=tp,
        batch=tuple(p.batch for p in chosen),
        power_w=tuple(p.power_w_per_gpu for p in chosen),
        references=tuple(p.reference for p in chosen),
    )


@cache
def power_curve(gpu: str, size_class: str) -> PowerCurve:
    """The power curve of ``gpu`` for ``size_class`` (``small`` or ``large``)."""
    model, tp = REFERENCE_RUNS[gpu][size_class]
    points = load_power_points()
    # v3 (measured power) is preferred where present: H100.
    v3 = tuple(p for p in points if "mlenergy_v3" in p.reference)
    v2 = tuple(p for p in points if "mlenergy_v2" in p.reference)
    return _curve(v3 if gpu == "h100" else v2, gpu, model, tp)


def size_class(total_params: float) -> str:
    """``large`` for models above :data:`LARGE_MODEL_PARAMS` parameters, else ``small``."""
    return "large" if total_params > LARGE_MODEL_PARAMS else "small"
