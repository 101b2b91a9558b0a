"""Engine profiles: how a serving engine turns GPU work into engine steps.

A LUT row is GPU time only (``lut/README.md``). What an engine adds around it
is the scenario's engine profile (``device_profiles/engines/``, schema
``simulator/schemas/engine_profile.schema.json``):

* **host time** of every engine step (``charged: per_step``, as a CUDA-graph
  engine pays it: a fused round of k drafts and a verify is one step) or of
  every forward pass (``per_forward``, as the older engine Vidur profiled);
* **CUDA-graph batch sizes**: a decode, verify or fused step of ``n``
  sequences replays the graph of the next captured size up, so the GPU works
  on that many sequences;
* **eager launch**: a forward pass without a graph costs CPU time to launch
  its kernels; a step takes the longer of its GPU time and its launches.

A bundled profile is named by id (:data:`BUNDLED_ENGINES`); any other value is
a path to a profile file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from simulator.built_files import BuiltFromFiles
from simulator.errors import InputError, Issue, make_issue
from simulator.input_files import read_bounded
from simulator.loading import load_validated

SCHEMA_NAME = "engine_profile.schema.json"
"""The packaged JSON Schema of engine profiles."""
WHAT = "engine profile"
ENGINE_CACHE_SIZE = 16
"""Most engine profiles kept (by file name and content) for the runs of a process to share."""
_ENGINES: BuiltFromFiles[EngineProfile] = BuiltFromFiles(ENGINE_CACHE_SIZE)

BUNDLED_ENGINES = ("cuda-graph", "eager-pytorch", "vidur-vllm-v0", "none")
"""Engine profiles shipped in ``device_profiles/engines/``, named by id in a scenario."""

DEFAULT_ENGINE = "cuda-graph"
"""The engine profile of a target class that names none."""

Charged = Literal["per_step", "per_forward"]


@dataclass(frozen=True)
class HostFit:
    """Host time ``fixed + per_sequence x n + per_sampled_token x sampled`` (ms)."""

    fixed_ms: float
    per_sequence_ms: float
    per_sampled_token_ms: float

    def time_ms(self, sequences: float, sampled: float) -> float:
        """Host time of one step (or forward pass) of ``sequences`` sampling ``sampled`` positions."""
        return (
            self.fixed_ms + self.per_sequence_ms * sequences + self.per_sampled_token_ms * sampled
        )


@dataclass(frozen=True)
class LaunchCost:
    """CPU time of launching one eager forward pass: ``fixed + per_layer x layers`` (ms)."""

    fixed_ms: float
    per_layer_ms: float
    model_layers: Mapping[str, int]

    def forward_ms(self, model: str) -> float:
        """Launch time of one forward pass of ``model`` (a model id the profile lists)."""
        return self.fixed_ms + self.per_layer_ms * self.model_layers[model]


@dataclass(frozen=True)
class EngineProfile:
    """One engine profile (see the module docstring).

    Attributes:
        id: Profile id.
        name: Human-readable name.
        charged: Whether host time is paid per step or per forward pass.
        plain: Host time of prefill and plain decode.
        speculative: Host time of verify steps and fused rounds.
        graph_batch_sizes: Captured CUDA-graph batch sizes, increasing (empty: none).
        launch: Eager launch cost (``None``: not modelled).
        path: Where the profile was loaded from.
    """

    id: str
    name: str
    charged: Charged
    plain: HostFit
    speculative: HostFit
    graph_batch_sizes: tuple[int, ...]
    launch: LaunchCost | None
    path: str

    def graph_size(self, sequences: int) -> int | None:
        """The captured batch size a step of ``sequences`` replays (``None``: it runs eagerly)."""
        for size in self.graph_batch_sizes:
            if size >= sequences:
                return size
        return None


def _host_fit(raw: Mapping[str, Any]) -> HostFit:
    return HostFit(
        float(raw["fixed_ms"]), float(raw["per_sequence_ms"]), float(raw["per_sampled_token_ms"])
    )


def _issues(raw: Mapping[str, Any], path: Path) -> list[Issue]:
    issues: list[Issue] = []
    if raw["id"] != path.stem:
        issues.append(
            make_issue(
                path,
                "id",
                raw["id"],
                f"{path.stem!r} (the file name)",
                "id differs from the file name",
            )
        )
    sizes = raw["cuda_graphs"]["batch_sizes"]
    if any(b <= a for a, b in pairwise(sizes)):
        issues.append(
            make_issue(
                path,
                "cuda_graphs.batch_sizes",
                sizes,
                "strictly increasing batch sizes",
                "batch sizes out of order or repeated",
            )
        )
    return issues


def load_engine_profile(path: Path) -> EngineProfile:
    """Load and check one engine profile file.

    Raises:
        InputError: With every problem of the file (file, key path, bad value, what is allowed).
    """
    path = Path(path)
    data = read_bounded(path, WHAT)
    return _ENGINES.load(str(path), data, lambda: _build(path, data))


def _build(path: Path, data: bytes) -> EngineProfile:
    """Check an engine profile file's bytes and build its profile."""
    document = load_validated(path, SCHEMA_NAME, WHAT, data)
    issues = _issues(document, path)
    if issues:
        raise InputError(issues)
    host = document["host"]
    launch = document["launch"]
    return EngineProfile(
        id=str(document["id"]),
        name=str(document["name"]),
        charged=host["charged"],
        plain=_host_fit(host["plain"]),
        speculative=_host_fit(host["speculative"]),
        graph_batch_sizes=tuple(int(size) for size in document["cuda_graphs"]["batch_sizes"]),
        launch=None
        if launch is None
        else LaunchCost(
            float(launch["fixed_ms"]),
            float(launch["per_layer_ms"]),
            MappingProxyType({str(k): int(v) for k, v in launch["model_layers"].items()}),
        ),
        path=str(path),
    )


def engine_reference(value: str) -> str:
    """The file a scenario's ``engine`` value names: a bundled id, else the value (a path)."""
    if value in BUNDLED_ENGINES:
        return f"builtin:device_profiles/engines/{value}.yaml"
    return value


def is_engine_path(value: str) -> bool:
    """Whether an ``engine`` value is a path to a profile file (not a bundled id)."""
    return value not in BUNDLED_ENGINES


def step_models(phase: str, model_id: str) -> tuple[str, ...]:
    """The model ids the forward passes of a LUT key's step run: ``(target,)`` or ``(target, draft)``.

    A fused model id ``<target>+<draft>`` runs both in its prefill and its rounds;
    a fused id without ``+`` stands for both.
    """
    if "+" in model_id and phase in ("prefill", "fused_decode"):
        target, _, draft = model_id.partition("+")
        return (target, draft)
    return (model_id,)
