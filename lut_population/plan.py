"""Which LUT files are built, and the cost model behind every key in them.

Files (one per model and hardware, ``lut/<model>__<hardware>.csv``):

* targets Llama-2-7B, Llama-3-8B, Llama-3.1-8B (TP 1, 2, 4, 8),
  Llama-2-70B, Llama-3.1-70B (TP 2, 4, 8; their fp16 weights do not fit one
  80 GB GPU) and CodeLlama-34B (TP 1, 2) on A100 and H100, phases prefill,
  draft_decode and verify; the Llama-3.1 models reuse the operator profile of
  the model with the same blocks (:data:`PROFILE_OF`); CodeLlama-34B has no
  profile and is priced by the operator roofline, like the drafts;
* draft models TinyLlama-1.1B, Llama-68M and Llama-3.2-1B on A100 and H100
  (TP 1) and on every calibrated client device, phases prefill and
  draft_decode; TinyLlama-1.1B's A100 and H100 files also hold verify rows
  (:data:`VERIFYING_DRAFTS`: it verifies for itself);
* fused pairs ``<target>+<draft>`` (draft and target share a tokenizer:
  Llama-2 targets and CodeLlama-34B with TinyLlama-1.1B or Llama-68M,
  TinyLlama-1.1B with itself, Llama-3-8B, Llama-3.1-8B and Llama-3.1-70B with
  Llama-3.2-1B) on A100 and H100 at every target TP degree, phases prefill and
  fused_decode;
* draft heads ``<target>.<kind>`` (``inputs/heads.yaml``: EAGLE, EAGLE-3,
  Medusa) on A100 and H100 at every target TP degree, phases prefill,
  draft_decode and (except Medusa) verify = one head step over ``fanout_k + 1``
  candidates per sequence; and their fused files ``<target>+<target>.<kind>``.

Every file holds fp16 rows only (the profiles are fp16) and pipeline
parallelism 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from lut_population.attention import AttentionModel, fit_attention
from lut_population.collectives import all_reduce_fit
from lut_population.device_roofline import RooflineModel, calibrate, cited_number, row_named
from lut_population.gpu_compose import ComposedGpuModel
from lut_population.gpu_scaling import gpu_ratios
from lut_population.grid import DATACENTER_BATCHES, DEVICE_BATCHES, Grid, base_grid
from lut_population.heads import HeadGpuModel, head_shape
from lut_population.inputs import (
    has_operator_profile,
    load_attention_profile,
    load_devices_config,
    load_heads,
    load_models,
    load_operator_profile,
)
from lut_population.op_roofline import FittedOps, op_roofline_fit
from lut_population.operators import OpTimes, ProfiledOps, ratio_scaled_profile
from lut_population.phases import FusedPrefillCost, FusedRoundCost, KeyCost, SinglePhaseCost
from lut_population.power import power_curve, size_class
from lut_population.work import IterationModel

VIDUR_COMMIT = "7d47513"
"""Short commit of the Vidur operator and network profiles."""

VIDUR_OLD_COMMIT = "acb95f6"
"""Short commit of the Vidur attention and CPU-overhead tables."""

DTYPE = "fp16"
PIPELINE_PARALLEL = 1

TARGETS: dict[str, tuple[int, ...]] = {
    "llama-2-7b": (1, 2, 4, 8),
    "llama-3-8b": (1, 2, 4, 8),
    "llama-3.1-8b": (1, 2, 4, 8),
    "llama-2-70b": (2, 4, 8),
    "llama-3.1-70b": (2, 4, 8),
    "codellama-34b": (1,),
}
"""Target models and their TP degrees."""

DRAFTS = ("tinyllama-1.1b", "llama-68m", "llama-3.2-1b")
"""Draft models."""

VERIFYING_DRAFTS: dict[str, tuple[int, ...]] = {"tinyllama-1.1b": (1,)}
"""Draft models that also verify, and their TP degrees: their A100 and H100 files add the
``verify`` phase (without the token-tree fanouts of :data:`TREE_HARDWARE`), so that they can
be the target of a fused pair (TinyLlama-1.1B drafting for itself, as in the Verify-PD
documents). Their client-device files keep prefill and draft_decode."""

FUSED_PAIRS = (
    ("llama-2-7b", "tinyllama-1.1b"),
    ("llama-2-7b", "llama-68m"),
    ("llama-2-70b", "tinyllama-1.1b"),
    ("llama-2-70b", "llama-68m"),
    ("llama-3-8b", "llama-3.2-1b"),
    ("llama-3.1-8b", "llama-3.2-1b"),
    ("llama-3.1-70b", "llama-3.2-1b"),
    ("tinyllama-1.1b", "tinyllama-1.1b"),
    ("codellama-34b", "tinyllama-1.1b"),
)
"""(target, draft) pairs with a shared tokenizer (CodeLlama-34B keeps the 32 000-token Llama-2
vocabulary). A pair may name one model twice: the draft is then a second copy of the model,
with its own weights and KV cache on the replica, as when an engine loads the same
checkpoint as draft and target."""

PROFILE_OF: dict[str, str] = {
    "llama-3.1-8b": "llama-3-8b",
    "llama-3.1-70b": "llama-2-70b",
}
"""Models priced with another model's operator profile: the same transformer-block matrices
(layers, hidden size, heads, KV heads, head width, MLP width; checked by :func:`profiled_model`).
Only the vocabulary may differ, and the LM head is priced from the model's own vocabulary."""

BLOCK_SHAPE_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "gated_mlp",
)
"""Shape fields that must agree for an operator profile to be shared."""

REFERENCE_MODEL = "llama-2-7b"
"""Profiled on both GPUs with hidden size 4096: the ratio reference for Llama-3-8B on H100."""


@dataclass(frozen=True)
class KeySpec:
    """One LUT key: its identity, its cost function and its starting grid.

    Attributes:
        phase: LUT phase.
        model: Model id written in the rows.
        hardware: Hardware id.
        tensor_parallel: TP degree.
        cost: The cost function.
        grid: The base grid (refined by the build unless ``refine`` is false).
        refine: Whether the build refines the grid (false for measured keys,
            whose grid is the measured points).
        point_notes: Extra ``notes`` text per grid point ``(context, batch, k)``.
    """

    phase: str
    model: str
    hardware: str
    tensor_parallel: int
    cost: KeyCost
    grid: Grid
    refine: bool = True
    point_notes: tuple[tuple[tuple[int, int, int], str], ...] = ()


@dataclass(frozen=True)
class FileSpec:
    """One LUT file.

    Attributes:
        name: File name inside ``lut/``.
        model: Model id of the file.
        hardware: Hardware id.
        method: How the numbers are made (for the catalog).
        keys: Its keys.
    """

    name: str
    model: str
    hardware: str
    method: str
    keys: tuple[KeySpec, ...]


def gpu_hardware() -> dict[str, str]:
    """Hardware id -> Vidur GPU name of the datacenter GPUs."""
    return {hw: str(e["profile_gpu"]) for hw, e in load_devices_config()["gpus"].items()}


@cache
def gpu_memory_mb(hardware: str) -> float:
    """GPU memory of a datacenter hardware id (from the size in the cited fact row's name)."""
    entry = load_devices_config()["gpus"][hardware]["memory_gb"]
    value = cited_number(
        row_named(entry["row"]), entry["column"], float(entry["value"]), f"gpus.{hardware}"
    )
    return value * 1024.0


def profiled_model(model_id: str) -> str:
    """The model whose operator profile prices ``model_id`` (itself unless in :data:`PROFILE_OF`).

    Raises:
        ValueError: The two models' transformer blocks differ.
    """
    other = PROFILE_OF.get(model_id, model_id)
    if other == model_id:
        return model_id
    models = load_models()
    for name in BLOCK_SHAPE_FIELDS:
        mine, theirs = getattr(models[model_id], name), getattr(models[other], name)
        if mine != theirs:
            raise ValueError(
                f"{model_id} cannot reuse the operator profile of {other}: {name} {mine} != {theirs}"
            )
    return other


def _ops(model_id: str, gpu: str, tp: int) -> tuple[OpTimes, str]:
    shape = load_models()[model_id]
    profiled = profiled_model(model_id)
    via = "" if profiled == model_id else f"[{profiled}]"
    if has_operator_profile(gpu, profiled):
        profile = load_operator_profile(gpu, profiled)
        return ProfiledOps(profile, tp, shape), f"vidur_profile@{VIDUR_COMMIT}{via}+compose_v2"
    if gpu != "a100" and has_operator_profile("a100", profiled):
        scaled = ratio_scaled_profile(
            load_operator_profile("a100", profiled),
            load_operator_profile("a100", REFERENCE_MODEL),
            load_operator_profile(gpu, REFERENCE_MODEL),
            gpu,
        )
        tag = f"vidur_profile@{VIDUR_COMMIT}{via}+{gpu}_ratio_v1+compose_v2"
        return ProfiledOps(scaled, tp, shape), tag
    return FittedOps(
        op_roofline_fit(gpu), shape, tp
    ), f"vidur_op_roofline@{VIDUR_COMMIT}+compose_v2"


@cache
def gpu_model(model_id: str, hardware: str, tp: int) -> ComposedGpuModel:
    """The composed cost model of ``model_id`` on a datacenter GPU replica of TP ``tp``."""
    gpu = gpu_hardware()[hardware]
    shape = load_models()[model_id]
    ops, source = _ops(model_id, gpu, tp)
    mem_ratio = cmp_ratio = 1.0
    if gpu != "a100":
        ratios = gpu_ratios("a100", gpu)
        mem_ratio, cmp_ratio = ratios.mem, ratios.cmp
    attention = AttentionModel(
        fit_attention(load_attention_profile()),
        heads=shape.num_heads / tp,
        kv_heads=shape.num_kv_heads / tp,
        head_dim=shape.head_dim,
        mem_ratio=mem_ratio,
        cmp_ratio=cmp_ratio,
    )
    return ComposedGpuModel(
        shape=shape,
        tensor_parallel=tp,
        ops=ops,
        attention=attention,
        all_reduce=all_reduce_fit(gpu, tp) if tp > 1 else None,
        power=power_curve(gpu, size_class(shape.total_params)),
        capacity_mb=gpu_memory_mb(hardware) * tp,
        source=source,
    )


@cache
def head_model(head_id: str, hardware: str, tp: int) -> HeadGpuModel:
    """The composed cost model of draft head ``head_id`` on its target's replica of TP ``tp``."""
    spec = load_heads()[head_id]
    target = gpu_model(spec.target, hardware, tp)
    return HeadGpuModel(spec, target, head_shape(spec, target.shape), f"head_v1[{target.source}]")


def head_phases(head_id: str) -> tuple[str, ...]:
    """LUT phases of a head file; a Medusa step has no width (its heads read one position)."""
    if load_heads()[head_id].kind == "medusa":
        return ("prefill", "draft_decode")
    return ("prefill", "draft_decode", "verify")


@cache
def device_model(model_id: str, hardware: str) -> RooflineModel:
    """The calibrated roofline cost model of ``model_id`` on a client device."""
    calibration = calibrate(hardware)
    return RooflineModel(
        shape=load_models()[model_id],
        calibration=calibration,
        tensor_parallel=1,
        capacity_mb=calibration.memory_mb,
        source="roofline_v1",
    )


def _single(
    model: IterationModel,
    hardware: str,
    phases: tuple[str, ...],
    batches: tuple[int, ...],
    trees: bool = False,
) -> list[KeySpec]:
    """Keys of one model's own phases (``trees``: a target, whose verify covers token trees)."""
    return [
        KeySpec(
            phase,
            model.shape.model_id,
            hardware,
            model.tensor_parallel,
            SinglePhaseCost(model, phase),
            base_grid(phase, model.shape.max_context, batches, trees),
        )
        for phase in phases
    ]


TREE_HARDWARE = frozenset({"h100-sxm5-80gb"})
"""GPUs whose target files carry the token-tree fanouts (``grid.TREE_FANOUTS``) in their verify
rows: the H100, where tree verifies were measured (``inputs/microbench_h100/trees_heads.csv``);
the LUT set's size budget (50 MiB) leaves no room for both GPUs."""


def verifier_tps(model_id: str) -> tuple[int, ...]:
    """TP degrees at which ``model_id`` has verify rows (:data:`TARGETS`, :data:`VERIFYING_DRAFTS`)."""
    if model_id in TARGETS:
        return TARGETS[model_id]
    return VERIFYING_DRAFTS[model_id]


def _draft_phases(model_id: str) -> tuple[str, ...]:
    """Phases of a draft model's datacenter file (verify for :data:`VERIFYING_DRAFTS`)."""
    if model_id in VERIFYING_DRAFTS:
        return ("prefill", "draft_decode", "verify")
    return ("prefill", "draft_decode")


UNTREED_TARGETS = frozenset({"codellama-34b"})
"""Targets whose verify rows stop at fanout_k 8 on every GPU, as in the A100 target files (token
trees of up to 9 nodes): no draft head was released for them (``inputs/heads.yaml``), and the
tree fanouts nearly doubled CodeLlama-34B's H100 file in a trial build, which the set's size
budget (52 MiB) has no room for."""


def file_name(model: str, hardware: str) -> str:
    """``<model>__<hardware>.csv``."""
    return f"{model}__{hardware}.csv"


def build_plan() -> tuple[FileSpec, ...]:
    """Every LUT file to build, in a fixed order."""
    files: list[FileSpec] = []
    hardware_ids = sorted(gpu_hardware())
    models = load_models()
    for model_id in sorted(TARGETS):
        for hw in hardware_ids:
            keys: list[KeySpec] = []
            for tp in TARGETS[model_id]:
                model = gpu_model(model_id, hw, tp)
                keys += _single(
                    model,
                    hw,
                    ("prefill", "draft_decode", "verify"),
                    DATACENTER_BATCHES,
                    hw in TREE_HARDWARE and model_id not in UNTREED_TARGETS,
                )
            method = gpu_model(model_id, hw, TARGETS[model_id][0]).source
            files.append(FileSpec(file_name(model_id, hw), model_id, hw, method, tuple(keys)))
    for model_id in sorted(DRAFTS):
        for hw in hardware_ids:
            keys = []
            for tp in VERIFYING_DRAFTS.get(model_id, (1,)):
                model = gpu_model(model_id, hw, tp)
                keys += _single(model, hw, _draft_phases(model_id), DATACENTER_BATCHES)
            method = gpu_model(model_id, hw, 1).source
            files.append(FileSpec(file_name(model_id, hw), model_id, hw, method, tuple(keys)))
        for hw in sorted(load_devices_config()["roofline"]):
            dev = device_model(model_id, hw)
            keys = _single(dev, hw, ("prefill", "draft_decode"), DEVICE_BATCHES)
            files.append(FileSpec(file_name(model_id, hw), model_id, hw, dev.source, tuple(keys)))
    for target_id, draft_id in sorted(FUSED_PAIRS):
        fused_id = f"{target_id}+{draft_id}"
        max_context = min(models[target_id].max_context, models[draft_id].max_context)
        for hw in hardware_ids:
            keys = []
            draft = gpu_model(draft_id, hw, 1)
            for tp in verifier_tps(target_id):
                target = gpu_model(target_id, hw, tp)
                source = f"fused_v1[{target.source}|{draft.source}]"
                for cost in (
                    FusedPrefillCost(target, draft, source),
                    FusedRoundCost(target, draft, source),
                ):
                    keys.append(
                        KeySpec(
                            cost.phase,
                            fused_id,
                            hw,
                            tp,
                            cost,
                            base_grid(cost.phase, max_context, DATACENTER_BATCHES),
                        )
                    )
            first = gpu_model(target_id, hw, verifier_tps(target_id)[0])
            method = f"fused_v1[{first.source}|{draft.source}]"
            files.append(FileSpec(file_name(fused_id, hw), fused_id, hw, method, tuple(keys)))
    return tuple(files) + _head_files(hardware_ids)


def _fused_head_grid(phase: str, head_id: str, max_context: int) -> Grid:
    grid = base_grid(phase, max_context, DATACENTER_BATCHES)
    spec = load_heads()[head_id]
    if phase == "fused_decode" and spec.kind == "medusa":
        return Grid(grid.context, grid.batch, tuple(range(1, spec.lm_heads + 1)))
    return grid


def _head_files(hardware_ids: list[str]) -> tuple[FileSpec, ...]:
    """Head files ``<target>.<kind>`` and fused files ``<target>+<target>.<kind>``."""
    files: list[FileSpec] = []
    heads = load_heads()
    for head_id in sorted(heads):
        target_id = heads[head_id].target
        max_context = load_models()[target_id].max_context
        fused_id = f"{target_id}+{head_id}"
        for hw in hardware_ids:
            keys: list[KeySpec] = []
            fused: list[KeySpec] = []
            for tp in TARGETS[target_id]:
                head = head_model(head_id, hw, tp)
                keys += _single(head, hw, head_phases(head_id), DATACENTER_BATCHES)
                target = gpu_model(target_id, hw, tp)
                source = f"fused_v1[{target.source}|head_v1]"
                medusa = heads[head_id].kind == "medusa"
                for cost in (
                    FusedPrefillCost(target, head, source),
                    FusedRoundCost(
                        target,
                        head,
                        source,
                        one_draft_step=medusa,
                        later_draft=head.later_step(),
                    ),
                ):
                    grid = _fused_head_grid(cost.phase, head_id, max_context)
                    fused.append(KeySpec(cost.phase, fused_id, hw, tp, cost, grid))
            first = head_model(head_id, hw, TARGETS[target_id][0])
            files.append(FileSpec(file_name(head_id, hw), head_id, hw, first.source, tuple(keys)))
            method = f"fused_v1[{first.target.source}|head_v1]"
            files.append(FileSpec(file_name(fused_id, hw), fused_id, hw, method, tuple(fused)))
    return tuple(files)
