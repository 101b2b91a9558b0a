"""LUTs whose latencies are DistServe's fitted A100-80GB costs (``source: distserve_fit_v1``).

DistServe (Zhong et al., OSDI 2024) ships, with its simulator, least-squares
fits of its own engine's iteration time on one A100-80GB GPU per model and TP
degree (``inputs/distserve/profiler-a100-80g.distserve.json``, copied whole
from LLMServe/DistServe commit 82831f1,
``simdistserve/estimators/profile_data/``). Its estimator
(``simdistserve/estimators/time_estimator.py``, same commit) prices, at
pipeline-parallel degree 1 and in milliseconds:

* a prefill of prompts of lengths ``l_i``: ``a + b * sum(l_i) + c * sum(l_i^2) + 1``
  with ``[a, b, c]`` = ``prefill`` (the ``+ 1`` is its per-stage pipeline
  constant, ``1 * pp``);
* a decode step of ``n`` requests whose contexts are ``t_i`` tokens:
  ``a + b * sum(t_i + 1) + c * n`` with ``[a, b, c]`` = ``decoding_smallbs``
  when ``n < decoding_large_small_bs_threshold``, else ``decoding_largebs``
  (its worker passes ``current_context_len + 1`` per request).

A LUT row is a batch of ``microbatch`` equal sequences, so a prefill row of
``context_len`` = ``L`` is ``a + b * B * L + c * B * L^2 + 1`` and a
``draft_decode`` row at ``context_len`` = ``t`` (tokens already cached) is
``a + b * B * (t + 1) + c * B``; these are exactly the estimator's values for
such a batch. The simulator worker's Ray overhead (2 ms + 1e-4 ms per context
token per iteration, ``simdistserve/base/worker.py``) is not part of the
estimator and is not added: host time is the simulator's engine profile's.

Grid: context_len 1, 16, 32, 64 and the usual powers of two up to the model's
maximum context (DistServe's chat prompts are often shorter than 128 tokens);
microbatch the datacenter batches, 512 and 1024 (:data:`LARGE_BATCHES`), plus
``threshold - 1`` and ``threshold``, so that the step between the two decode
fits falls between neighbouring rows;
then refined like the composed files (the prefill quadratic gets extra
context points; the decode rows are linear and need none).

The same is built from DistServe's fit of vLLM
(``inputs/distserve/profiler-a100-80g.vllm.json``, the profile its simulator
prices its vLLM baseline with) into ``lut/distserve_vllm/`` (``source:
distserve_vllm_fit_v1``), with the same model ids, formulas and grid.

Peak memory and KV delta come from the model's shape (fp16 weights, live
activations, the KV shape formula), as for the composed files; energy is not
modelled (the fits carry no power).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from lut_population.arrays import FloatArray
from lut_population.grid import BASE_CONTEXTS, DATACENTER_BATCHES, Grid
from lut_population.inputs import load_distserve, load_models
from lut_population.phases import SinglePhaseCost
from lut_population.plan import FileSpec, KeySpec, file_name, gpu_memory_mb
from lut_population.shapes import BYTES_PER_MIB, ModelShape
from lut_population.work import Work, fp16_activations_mb

SOURCE = "distserve_fit_v1"
"""``source`` tag of the rows (and the files' method) priced by DistServe's own engine's fit."""

VLLM_SOURCE = "distserve_vllm_fit_v1"
"""``source`` tag of the rows priced by DistServe's fit of vLLM (``lut/distserve_vllm/``)."""

ENGINES: dict[str, tuple[str, str]] = {
    "distserve": (SOURCE, ""),
    "vllm": (VLLM_SOURCE, "distserve_vllm/"),
}
"""Profile engine -> (source tag, folder inside ``lut/``)."""

HARDWARE = "a100-sxm4-80gb"
"""The fits were made on A100-80GB (the profile file's name)."""

MODELS: dict[str, str] = {"opt-13b": "facebook/opt-13b", "opt-66b": "facebook/opt-66b"}
"""LUT model id -> model key of the profile file."""

SHORT_CONTEXTS = (1, 16, 32, 64)
"""context_len values below the base grid's 128."""

LARGE_BATCHES = (512, 1024)
"""microbatch values beyond the datacenter grid's 256, up to the batch limit DistServe's
evaluation gives vLLM (``--max-num-seqs 1024``, ``evaluation/2-benchmark-serving/
2-start-api-server.py``), so that a scenario configured like it stays on the grid."""

PIPELINE_CONSTANT_MS = 1.0
"""The estimator's prefill pipeline constant at PP 1 (``pp_const = 1 * pp``, time_estimator.py)."""

PHASES = ("prefill", "draft_decode")


@dataclass(frozen=True)
class DistServeFit:
    """DistServe's fitted coefficients of one model at one TP degree (milliseconds)."""

    prefill: tuple[float, float, float]
    decode_small: tuple[float, float, float]
    decode_large: tuple[float, float, float]
    threshold: int

    def prefill_ms(self, batch: FloatArray, prompt: FloatArray) -> FloatArray:
        """A prefill of ``batch`` prompts of ``prompt`` tokens each."""
        a, b, c = self.prefill
        return np.asarray(a + b * batch * prompt + c * batch * prompt**2 + PIPELINE_CONSTANT_MS)

    def decode_ms(self, batch: FloatArray, cached: FloatArray) -> FloatArray:
        """A decode step of ``batch`` sequences holding ``cached`` tokens each."""
        small = np.asarray(batch) < self.threshold
        a = np.where(small, self.decode_small[0], self.decode_large[0])
        b = np.where(small, self.decode_small[1], self.decode_large[1])
        c = np.where(small, self.decode_small[2], self.decode_large[2])
        return np.asarray(a + b * batch * (cached + 1.0) + c * batch)


def _triple(values: list[float]) -> tuple[float, float, float]:
    return (float(values[0]), float(values[1]), float(values[2]))


@cache
def distserve_fit(model_id: str, tensor_parallel: int, engine: str = "distserve") -> DistServeFit:
    """The fit of ``engine`` for a LUT model id at a TP degree (KeyError when there is none)."""
    entry = load_distserve(engine=engine)[MODELS[model_id]][str(tensor_parallel)]
    return DistServeFit(
        prefill=_triple(entry["prefill"]),
        decode_small=_triple(entry["decoding_smallbs"]),
        decode_large=_triple(entry["decoding_largebs"]),
        threshold=int(entry["decoding_large_small_bs_threshold"]),
    )


def fitted_tps(model_id: str, engine: str = "distserve") -> tuple[int, ...]:
    """TP degrees the profile of ``engine`` has for the model."""
    return tuple(sorted(int(tp) for tp in load_distserve(engine=engine)[MODELS[model_id]]))


@dataclass(frozen=True)
class DistServeModel:
    """An :class:`~lut_population.work.IterationModel` priced by :class:`DistServeFit`.

    A work item with no cached tokens is a prefill; one with one new token a
    decode step; anything else (a verify) is outside the fits.
    """

    shape: ModelShape
    tensor_parallel: int
    fit: DistServeFit
    source: str = SOURCE

    @property
    def capacity_mb(self) -> float | None:
        """Memory of the replica's GPUs."""
        return gpu_memory_mb(HARDWARE) * self.tensor_parallel

    def latency_ms(self, work: Work) -> FloatArray:
        """The fitted latency (module docstring).

        Raises:
            ValueError: A work item that is neither a prefill nor a decode step.
        """
        if np.all(work.cached == 0):
            return self.fit.prefill_ms(work.batch, work.new)
        if np.all(work.new == 1):
            return self.fit.decode_ms(work.batch, work.cached)
        raise ValueError(f"{self.shape.model_id}: the DistServe fits price prefill and decode only")

    def power_w(self, work: Work) -> FloatArray | None:
        """Not in the fits."""
        return None

    def weights_mb(self) -> float:
        """fp16 weights of the whole model."""
        return self.shape.weight_bytes() / BYTES_PER_MIB

    def activations_mb(self, work: Work) -> FloatArray:
        """Live fp16 activations plus fp32 logits, summed over the replica."""
        return fp16_activations_mb(self.shape, work, self.tensor_parallel)


def distserve_grid(shape: ModelShape, fit: DistServeFit) -> Grid:
    """Starting grid of a key (module docstring)."""
    contexts = tuple(c for c in (*SHORT_CONTEXTS, *BASE_CONTEXTS) if c <= shape.max_context)
    batches = tuple(sorted({*DATACENTER_BATCHES, *LARGE_BATCHES, fit.threshold - 1, fit.threshold}))
    return Grid(contexts, batches, (1,))


def distserve_model(
    model_id: str, tensor_parallel: int, engine: str = "distserve"
) -> DistServeModel:
    """The model of ``model_id`` at ``tensor_parallel`` priced by the fit of ``engine``."""
    shape = load_models()[model_id]
    fit = distserve_fit(model_id, tensor_parallel, engine)
    return DistServeModel(shape, tensor_parallel, fit, ENGINES[engine][0])


def distserve_plan() -> tuple[FileSpec, ...]:
    """One file per engine and model of :data:`MODELS`, every TP degree of the profile."""
    files = []
    for engine, (source, folder) in ENGINES.items():
        for model_id in MODELS:
            keys = []
            for tp in fitted_tps(model_id, engine):
                model = distserve_model(model_id, tp, engine)
                grid = distserve_grid(model.shape, model.fit)
                keys += [
                    KeySpec(phase, model_id, HARDWARE, tp, SinglePhaseCost(model, phase), grid)
                    for phase in PHASES
                ]
            name = folder + file_name(model_id, HARDWARE)
            files.append(FileSpec(name, model_id, HARDWARE, source, tuple(keys)))
    return tuple(files)


def engine_of(source: str) -> str | None:
    """The profile engine whose files carry ``source``, or ``None``."""
    return next((e for e, (tag, _) in ENGINES.items() if tag == source), None)
