"""How much faster one datacenter GPU runs bandwidth-bound and compute-bound kernels than another.

Both ratios come from the Vidur operator profiles of the models profiled on
both GPUs (Llama-2-7B and Llama-2-70B at TP 1, 2, 4, 8), comparing the four
matrix-product operators (QKV, attention output, MLP up, MLP down) at the
same token count:

* bandwidth-bound ratio: token counts 1, 2, 4, 8 of operators whose weight
  shard is at least 64 MiB (reading the weights dominates, launch latency does
  not);
* compute-bound ratio: token counts 2048, 3072, 4096 (every operator).

Each ratio is the median of ``time(target GPU) / time(source GPU)`` over those
samples; the spread is reported in the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from lut_population.inputs import has_operator_profile, load_models, load_operator_profile
from lut_population.operators import MonotoneCurve

MEMORY_BOUND_TOKENS = (1.0, 2.0, 4.0, 8.0)
COMPUTE_BOUND_TOKENS = (2048.0, 3072.0, 4096.0)
MIN_WEIGHT_MIB = 64.0
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
REFERENCE_MODELS = ("llama-2-7b", "llama-2-70b")


@dataclass(frozen=True)
class GpuRatios:
    """Time ratios target/source for the two kernel regimes.

    Attributes:
        source: GPU the ratios convert from.
        target: GPU the ratios convert to.
        mem: Median bandwidth-bound time ratio.
        cmp: Median compute-bound time ratio.
        mem_range: (min, max) of the bandwidth-bound samples.
        cmp_range: (min, max) of the compute-bound samples.
        samples: Number of (bandwidth, compute) samples.
    """

    source: str
    target: str
    mem: float
    cmp: float
    mem_range: tuple[float, float]
    cmp_range: tuple[float, float]
    samples: tuple[int, int]


def _gemm_shapes(model_id: str, tp: int) -> dict[str, tuple[int, int]]:
    shape = load_models()[model_id]
    return {
        "attn_pre_proj": (shape.hidden_size, shape.qkv_width // tp),
        "attn_post_proj": (shape.attention_width // tp, shape.hidden_size),
        "mlp_up_proj": (shape.hidden_size, shape.up_width // tp),
        "mlp_down_proj": (shape.intermediate_size // tp, shape.hidden_size),
    }


@cache
def gpu_ratios(source: str, target: str) -> GpuRatios:
    """Measure the bandwidth- and compute-bound time ratios between two GPUs."""
    mem: list[float] = []
    cmp: list[float] = []
    for model_id in REFERENCE_MODELS:
        if not (has_operator_profile(source, model_id) and has_operator_profile(target, model_id)):
            continue
        src = load_operator_profile(source, model_id)
        dst = load_operator_profile(target, model_id)
        for tp in sorted(set(src.curves) & set(dst.curves)):
            for op, (k, n) in _gemm_shapes(model_id, tp).items():
                a = MonotoneCurve(src.curves[tp][op])
                b = MonotoneCurve(dst.curves[tp][op])
                if k * n * 2 / 2**20 >= MIN_WEIGHT_MIB:
                    x = np.asarray(MEMORY_BOUND_TOKENS)
                    mem.extend((b(x) / a(x)).tolist())
                x = np.asarray(COMPUTE_BOUND_TOKENS)
                cmp.extend((b(x) / a(x)).tolist())
    if not mem or not cmp:
        raise LookupError(f"no operator profiles on both {source} and {target}")
    return GpuRatios(
        source,
        target,
        float(np.median(mem)),
        float(np.median(cmp)),
        (min(mem), max(mem)),
        (min(cmp), max(cmp)),
        (len(mem), len(cmp)),
    )
