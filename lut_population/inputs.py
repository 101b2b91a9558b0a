"""Read the committed inputs (``lut_population/inputs``) into frozen records.

Nothing here computes a model: the loaders parse the copied measurement rows
and the hand-written YAML files (model shapes, weight formats, device
calibration choices), check them, and hand them to the modelling modules.
Problems in the YAML files are reported as :class:`~simulator.errors.InputError`
with the file and key path.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import yaml

from lut_population.arrays import FloatArray
from lut_population.head_specs import HEAD_KINDS, HeadSpec
from lut_population.paths import INPUTS_DIR
from lut_population.shapes import ModelShape
from simulator.errors import InputError, Issue, make_issue

OP_NAMES: tuple[str, ...] = (
    "emb",
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
"""Vidur operator names, in the order of a transformer block."""


@dataclass(frozen=True)
class QuantFormat:
    """Bits per weight of one weight format.

    Attributes:
        name: Format id (``quant_formats.yaml`` key).
        block_bits: Bits per weight of transformer-block matrices.
        embedding_bits: Bits per weight of the embedding and LM head.
        source: Where the figures come from.
    """

    name: str
    block_bits: float
    embedding_bits: float
    source: str


@dataclass(frozen=True)
class OperatorCurve:
    """Median time of one operator against the batch's token count, for one TP degree.

    Attributes:
        tokens: Token counts, ascending, without repeats.
        time_ms: Median time at each token count (repeated counts take the median).
    """

    tokens: FloatArray
    time_ms: FloatArray


@dataclass(frozen=True)
class OperatorProfile:
    """One Vidur ``mlp.csv`` profile: per-operator curves for each TP degree.

    Attributes:
        gpu: ``a100`` or ``h100``.
        model_id: The profiled model.
        curves: ``curves[tp][op]`` for every TP degree and operator present.
        file: The input file, repository-relative, for citations.
    """

    gpu: str
    model_id: str
    curves: dict[int, dict[str, OperatorCurve]]
    file: str


@dataclass(frozen=True)
class AttentionProfile:
    """The reduced Vidur A100 attention table (FlashAttention).

    Attributes:
        heads_per_gpu: Query heads per GPU of the profiled shape.
        kv_heads_per_gpu: KV heads per GPU of the profiled shape.
        head_dim: Head width of the profiled shape.
        decode_batch: Decode rows: batch size.
        decode_context: Decode rows: cached tokens per sequence.
        decode_ms: Decode rows: median time.
        prefill_chunk: Prefill rows: prompt tokens in the chunk.
        prefill_context: Prefill rows: tokens already cached before the chunk.
        prefill_ms: Prefill rows: median time.
    """

    heads_per_gpu: int
    kv_heads_per_gpu: int
    head_dim: int
    decode_batch: FloatArray
    decode_context: FloatArray
    decode_ms: FloatArray
    prefill_chunk: FloatArray
    prefill_context: FloatArray
    prefill_ms: FloatArray


@dataclass(frozen=True)
class PowerPoint:
    """One ML.ENERGY measurement turned into average power per GPU.

    Attributes:
        gpu: ``a100`` or ``h100``.
        model: The measured checkpoint.
        tensor_parallel: GPUs per replica of the run.
        batch: Average batch size of the run.
        power_w_per_gpu: Average power per GPU.
        itl_ms: Median inter-token latency (v3) or average time per output token (v2).
        reference: Which row and which arithmetic.
    """

    gpu: str
    model: str
    tensor_parallel: int
    batch: float
    power_w_per_gpu: float
    itl_ms: float
    reference: str


def _yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


_MODEL_INT_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_context",
)


def _ints(
    raw: dict[str, Any],
    where: str,
    fields: Sequence[tuple[str, int]],
    file: Path,
    issues: list[Issue],
) -> dict[str, int]:
    """The whole-number fields of an entry (each at least its minimum); problems go to ``issues``."""
    out: dict[str, int] = {}
    for name, least in fields:
        value = raw.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            allowed = "a positive integer" if least == 1 else f"an integer >= {least}"
            issues.append(make_issue(file, f"{where}.{name}", value, allowed))
        else:
            out[name] = value
    return out


def _flags(
    raw: dict[str, Any], where: str, fields: Sequence[str], file: Path, issues: list[Issue]
) -> dict[str, bool]:
    """The true/false fields of an entry; problems go to ``issues``."""
    out: dict[str, bool] = {}
    for name in fields:
        value = raw.get(name)
        if not isinstance(value, bool):
            issues.append(make_issue(file, f"{where}.{name}", value, "true or false"))
        else:
            out[name] = value
    return out


def _texts(
    raw: dict[str, Any], where: str, fields: Sequence[str], file: Path, issues: list[Issue]
) -> dict[str, str]:
    """The non-empty text fields of an entry (stripped); problems go to ``issues``."""
    out: dict[str, str] = {}
    for name in fields:
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            issues.append(make_issue(file, f"{where}.{name}", value, "a non-empty string"))
        else:
            out[name] = value.strip()
    return out


def _model_from(model_id: str, raw: Any, file: Path, issues: list[Issue]) -> ModelShape | None:
    where = f"models.{model_id}"
    if not isinstance(raw, dict):
        issues.append(make_issue(file, where, raw, "a mapping of shape fields", "not a mapping"))
        return None
    ints = _ints(raw, where, [(name, 1) for name in _MODEL_INT_FIELDS], file, issues)
    flags = _flags(raw, where, ("gated_mlp", "tied_embeddings"), file, issues)
    texts = _texts(raw, where, ("name", "source"), file, issues)
    if len(ints) != len(_MODEL_INT_FIELDS) or len(flags) != 2 or len(texts) != 2:
        return None
    return ModelShape(
        model_id=model_id,
        name=texts["name"],
        num_layers=ints["num_layers"],
        hidden_size=ints["hidden_size"],
        num_heads=ints["num_heads"],
        num_kv_heads=ints["num_kv_heads"],
        head_dim=ints["head_dim"],
        intermediate_size=ints["intermediate_size"],
        vocab_size=ints["vocab_size"],
        gated_mlp=flags["gated_mlp"],
        tied_embeddings=flags["tied_embeddings"],
        max_context=ints["max_context"],
        source=texts["source"],
    )


T = TypeVar("T")


def _load_section(
    file: Path, section: str, what: str, parse: Callable[[str, Any, Path, list[Issue]], T | None]
) -> dict[str, T]:
    """Parse every entry of the mapping ``section`` of a YAML input with ``parse``.

    Raises:
        InputError: The section is not a mapping, or entries have missing or bad fields
            (every problem of the file together).
    """
    raw = _yaml(file)
    entries = raw.get(section) if isinstance(raw, dict) else None
    if not isinstance(entries, dict):
        raise InputError([make_issue(file, section, entries, f"a mapping of {what} ids")])
    issues: list[Issue] = []
    parsed: dict[str, T] = {}
    for entry_id, entry in entries.items():
        value = parse(str(entry_id), entry, file, issues)
        if value is not None:
            parsed[str(entry_id)] = value
    if issues:
        raise InputError(issues)
    return parsed


@cache
def load_models(inputs_dir: Path = INPUTS_DIR) -> dict[str, ModelShape]:
    """Read ``models.yaml`` into shapes keyed by model id.

    Raises:
        InputError: A model entry is missing a field or has a bad value.
    """
    return _load_section(inputs_dir / "models.yaml", "models", "model", _model_from)


@cache
def load_quant_formats(inputs_dir: Path = INPUTS_DIR) -> dict[str, QuantFormat]:
    """Read ``quant_formats.yaml``.

    Raises:
        InputError: A format lacks its bit widths or source.
    """
    file = inputs_dir / "quant_formats.yaml"
    raw = _yaml(file)
    issues: list[Issue] = []
    formats: dict[str, QuantFormat] = {}
    for name, entry in (raw.get("formats") or {}).items():
        where = f"formats.{name}"
        block = entry.get("block_bits") if isinstance(entry, dict) else None
        embed = entry.get("embedding_bits") if isinstance(entry, dict) else None
        source = entry.get("source") if isinstance(entry, dict) else None
        bad = False
        for key, value in (("block_bits", block), ("embedding_bits", embed)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                issues.append(make_issue(file, f"{where}.{key}", value, "a positive number"))
                bad = True
        if not isinstance(source, str):
            issues.append(make_issue(file, f"{where}.source", source, "a citation string"))
            bad = True
        if not bad and isinstance(block, (int, float)) and isinstance(embed, (int, float)):
            formats[str(name)] = QuantFormat(str(name), float(block), float(embed), str(source))
    if issues:
        raise InputError(issues)
    return formats


def mlp_profile_path(gpu: str, model_id: str, inputs_dir: Path = INPUTS_DIR) -> Path:
    """Where the copied operator profile of ``model_id`` on ``gpu`` lives."""
    return inputs_dir / "vidur" / "mlp" / f"{gpu}__{model_id}.csv"


def has_operator_profile(gpu: str, model_id: str, inputs_dir: Path = INPUTS_DIR) -> bool:
    """Whether a Vidur operator profile of ``model_id`` on ``gpu`` was copied."""
    return mlp_profile_path(gpu, model_id, inputs_dir).is_file()


@cache
def load_operator_profile(
    gpu: str, model_id: str, inputs_dir: Path = INPUTS_DIR
) -> OperatorProfile:
    """Read one copied Vidur ``mlp.csv`` profile.

    Repeated token counts (Vidur profiles 2048 and 4096 twice) are merged by
    taking the median of their medians.
    """
    path = mlp_profile_path(gpu, model_id, inputs_dir)
    frame = pd.read_csv(path)
    curves: dict[int, dict[str, OperatorCurve]] = {}
    for tp, group in frame.groupby("num_tensor_parallel_workers", sort=True):
        per_op: dict[str, OperatorCurve] = {}
        for op in OP_NAMES:
            column = f"time_stats.{op}.median"
            if column not in group.columns:
                continue
            merged = group.groupby("num_tokens", sort=True)[column].median()
            per_op[op] = OperatorCurve(
                tokens=merged.index.to_numpy(dtype=np.float64),
                time_ms=merged.to_numpy(dtype=np.float64),
            )
        curves[int(str(tp))] = per_op
    return OperatorProfile(gpu, model_id, curves, f"inputs/vidur/mlp/{path.name}")


@cache
def load_attention_profile(inputs_dir: Path = INPUTS_DIR) -> AttentionProfile:
    """Read the reduced Vidur A100 attention table."""
    frame = pd.read_csv(inputs_dir / "vidur" / "attention_a100.csv")
    tp = int(frame["num_tensor_parallel_workers"].iloc[0])
    heads = int(frame["n_q_head"].iloc[0]) // tp
    kv_heads = int(frame["n_kv_head"].iloc[0]) // tp
    head_dim = int(frame["n_embd"].iloc[0]) // int(frame["n_q_head"].iloc[0])
    prefill = frame["is_prefill"].astype(str) == "True"
    decode = frame[~prefill]
    pre = frame[prefill]
    return AttentionProfile(
        heads_per_gpu=heads,
        kv_heads_per_gpu=kv_heads,
        head_dim=head_dim,
        decode_batch=decode["batch_size"].to_numpy(dtype=np.float64),
        decode_context=decode["kv_cache_size"].to_numpy(dtype=np.float64),
        decode_ms=decode["time_stats.attn_decode.median"].to_numpy(dtype=np.float64),
        prefill_chunk=pre["prefill_chunk_size"].to_numpy(dtype=np.float64),
        prefill_context=pre["kv_cache_size"].to_numpy(dtype=np.float64),
        prefill_ms=pre["time_stats.attn_prefill.median"].to_numpy(dtype=np.float64),
    )


@cache
def load_all_reduce(gpu: str, inputs_dir: Path = INPUTS_DIR) -> dict[int, OperatorCurve]:
    """Read the intra-node NCCL all-reduce profile of ``gpu``: time against bytes per worker count."""
    frame = pd.read_csv(inputs_dir / "vidur" / f"all_reduce_{gpu}.csv")
    out: dict[int, OperatorCurve] = {}
    for workers, group in frame.groupby("num_workers", sort=True):
        merged = group.groupby("size", sort=True)["time_stats.all_reduce.median"].median()
        out[int(str(workers))] = OperatorCurve(
            tokens=merged.index.to_numpy(dtype=np.float64),
            time_ms=merged.to_numpy(dtype=np.float64),
        )
    return out


CPU_PARTS = (
    "schedule_median",
    "sampler_e2e_median",
    "prepare_inputs_e2e_median",
    "process_model_outputs_median",
)
"""The per-iteration host-side steps of the Vidur CPU-overhead profile."""


@cache
def load_cpu_overheads(inputs_dir: Path = INPUTS_DIR) -> pd.DataFrame:
    """Read the Vidur A100 CPU-overhead medians (one row per batch size)."""
    frame = pd.read_csv(inputs_dir / "vidur" / "cpu_overheads_a100.csv")
    ordered: pd.DataFrame = frame.sort_values("batch_size", kind="stable").reset_index(drop=True)
    return ordered


_V2_GPUS = {"NVIDIA A100-SXM4-40GB": "a100", "NVIDIA H100 80GB HBM3": "h100"}


@cache
def load_power_points(inputs_dir: Path = INPUTS_DIR) -> tuple[PowerPoint, ...]:
    """Read the ML.ENERGY rows as per-GPU average power against batch size.

    v2 rows (A100-SXM4-40GB and H100): power = energy_per_output_token_J x
    token_throughput_tok_s / (tp x pp). v3 rows (H100): power = avg_power_W /
    num_gpus.
    """
    points: list[PowerPoint] = []
    with (inputs_dir / "energy" / "mlenergy_v2_rows.csv").open(encoding="utf-8") as handle:
        for index, row in enumerate(csv.DictReader(handle), start=2):
            gpus = int(row["tp"]) * int(row["pp"])
            power = float(row["energy_per_output_token_J"]) * float(row["token_throughput_tok_s"])
            points.append(
                PowerPoint(
                    gpu=_V2_GPUS[row["gpu"]],
                    model=row["model"],
                    tensor_parallel=int(row["tp"]),
                    batch=float(row["avg_batch"]),
                    power_w_per_gpu=power / gpus,
                    itl_ms=float(row["avg_tpot_s"]) * 1000.0,
                    reference=(
                        f"inputs/energy/mlenergy_v2_rows.csv line {index}: energy_per_output_token_J"
                        " x token_throughput_tok_s / (tp x pp)"
                    ),
                )
            )
    with (inputs_dir / "energy" / "mlenergy_v3_rows.csv").open(encoding="utf-8") as handle:
        for index, row in enumerate(csv.DictReader(handle), start=2):
            points.append(
                PowerPoint(
                    gpu="h100",
                    model=row["model"],
                    tensor_parallel=int(row["tp"]),
                    batch=float(row["avg_batch"]),
                    power_w_per_gpu=float(row["avg_power_W"]) / int(row["num_gpus"]),
                    itl_ms=float(row["median_itl_ms"]),
                    reference=(
                        f"inputs/energy/mlenergy_v3_rows.csv line {index}: avg_power_W / num_gpus"
                    ),
                )
            )
    return tuple(points)


@cache
def load_device_facts(inputs_dir: Path = INPUTS_DIR) -> tuple[dict[str, str], ...]:
    """Read the copied curated device-fact rows."""
    with (inputs_dir / "devices" / "device_facts_rows.csv").open(encoding="utf-8") as handle:
        return tuple(dict(row) for row in csv.DictReader(handle))


@cache
def load_devices_config(inputs_dir: Path = INPUTS_DIR) -> dict[str, Any]:
    """Read ``devices.yaml`` (which fact calibrates which hardware id)."""
    loaded: dict[str, Any] = _yaml(inputs_dir / "devices.yaml")
    return loaded


def load_microbench_iterations(inputs_dir: Path = INPUTS_DIR) -> pd.DataFrame:
    """Read the H100 whole-iteration measurements of this project, as the raw file.

    ``inputs/microbench_h100/iterations.csv`` is an unmodified copy of the
    project's ``microbench_h100/iterations.csv`` (its README describes the
    columns and modes; ``mode == "graph"`` rows are GPU time only). One row per
    measured point; nothing is filtered or converted here.
    """
    return pd.read_csv(inputs_dir / "microbench_h100" / "iterations.csv")


@cache
def load_distserve(inputs_dir: Path = INPUTS_DIR, engine: str = "distserve") -> dict[str, Any]:
    """Read DistServe's fitted A100 coefficients of ``engine`` (``distserve`` or ``vllm``)."""
    path = inputs_dir / "distserve" / f"profiler-a100-80g.{engine}.json"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


_HEAD_INT_FIELDS = (
    ("decoder_layers", 0),
    ("depth", 1),
    ("fc_inputs", 0),
    ("qkv_inputs", 1),
    ("lm_heads", 1),
    ("residual_blocks", 0),
    ("lm_head_vocab", 1),
)
"""Whole-number fields of a head entry and their smallest allowed value."""


def _head_from(head_id: str, raw: Any, file: Path, issues: list[Issue]) -> HeadSpec | None:
    where = f"heads.{head_id}"
    if not isinstance(raw, dict):
        issues.append(make_issue(file, where, raw, "a mapping of head fields", "not a mapping"))
        return None
    before = len(issues)
    ints = _ints(raw, where, _HEAD_INT_FIELDS, file, issues)
    kind = raw.get("kind")
    if kind not in HEAD_KINDS:
        issues.append(make_issue(file, f"{where}.kind", kind, " | ".join(HEAD_KINDS)))
    target = raw.get("target")
    if target not in load_models(file.parent):
        issues.append(make_issue(file, f"{where}.target", target, "a model id of models.yaml"))
    flags = _flags(raw, where, ("fc_each_step", "own_lm_head"), file, issues)
    texts = _texts(raw, where, ("name", "source"), file, issues)
    if len(issues) > before:
        return None
    return HeadSpec(
        model_id=head_id,
        kind=str(kind),
        target=str(target),
        name=texts["name"],
        source=texts["source"],
        decoder_layers=ints["decoder_layers"],
        depth=ints["depth"],
        fc_inputs=ints["fc_inputs"],
        fc_each_step=flags["fc_each_step"],
        qkv_inputs=ints["qkv_inputs"],
        lm_heads=ints["lm_heads"],
        residual_blocks=ints["residual_blocks"],
        lm_head_vocab=ints["lm_head_vocab"],
        own_lm_head=flags["own_lm_head"],
    )


@cache
def load_heads(inputs_dir: Path = INPUTS_DIR) -> dict[str, HeadSpec]:
    """Read ``heads.yaml`` into head specs keyed by head model id.

    Raises:
        InputError: A head entry is missing a field or has a bad value.
    """
    return _load_section(inputs_dir / "heads.yaml", "heads", "head model", _head_from)


@cache
def load_trees_heads(inputs_dir: Path = INPUTS_DIR) -> pd.DataFrame:
    """Read the H100 token-tree and draft-head measurements (``microbench_h100/trees_heads.csv``)."""
    frame: pd.DataFrame = pd.read_csv(inputs_dir / "microbench_h100" / "trees_heads.csv")
    return frame
