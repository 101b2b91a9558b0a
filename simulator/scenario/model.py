"""The frozen objects a loaded scenario is made of.

Everything downstream of the loader (engine, planner, reports) reads these
dataclasses; nothing past :func:`simulator.scenario.load_scenario` sees the
raw YAML mapping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from policies.batching import BatchLimits
from simulator.acceptance import AcceptanceModel
from simulator.devices import Availability, DeviceProfile, EngineProfile
from simulator.lut import LutKey, LutManager, OutOfRange
from simulator.workload import RequestTable, WorkloadSpec

Mode = Literal["none", "distributed", "fused", "hybrid"]
DeviceType = Literal["draft", "target"]
ModelKind = Literal["drafter", "verifier", "fused"]
KvOnFull = Literal["queue", "preempt_recompute"]
GpuSharing = Literal["serialized", "overlap"]

MODES: tuple[Mode, ...] = ("none", "distributed", "fused", "hybrid")


@dataclass(frozen=True)
class Metadata:
    """Descriptive fields of a scenario."""

    description: str
    label: str
    references: tuple[str, ...]


@dataclass(frozen=True)
class PolicyChoice:
    """A named policy of one family with its built parameters.

    Attributes:
        family: The policy family (see :mod:`policies.families`).
        name: The registered policy name.
        params: An instance of the policy class's ``Params`` dataclass.
        file: The scenario file that chose it ("" when built in Python), for messages.
        key: The key that chose it, e.g. ``scheduler.routing.policy`` (for messages).
    """

    family: str
    name: str
    params: Any
    file: str = field(default="", compare=False, repr=False)
    key: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class ModelSpec:
    """A model the scenario runs, with the LUT rows it uses.

    Attributes:
        name: The scenario's name for the model.
        kind: drafter, verifier or fused.
        model_id: The ``model`` value of its LUT rows.
        lut_path: The LUT file it was loaded from.
        dtype: The dtype of the LUT rows used.
        acceptance: Name of its acceptance curve (drafter and fused models
            in modes that speculate), else ``None``.
    """

    name: str
    kind: ModelKind
    model_id: str
    lut_path: Path
    dtype: str
    acceptance: str | None


@dataclass(frozen=True)
class DeviceClass:
    """One entry of ``hardware_profiles``: a class of identical devices or replicas.

    Attributes:
        id: Its name in the scenario.
        type: draft (client devices) or target (replica pool).
        profile: The loaded device profile.
        profile_path: Where the profile was loaded from.
        count: Number of devices / replicas.
        model: Name of the model it runs: the drafter of a draft class (``None``
            when the mode drafts nowhere; the first of ``draft_models``), the
            verifier of a target class (``None`` in fused mode).
        fused_model: Target classes in fused/hybrid mode: the fused model.
        tensor_parallel: TP degree of a replica (1 for draft devices).
        pipeline_parallel: PP degree of a replica (1 for draft devices).
        usd_per_hour: Price per device/replica-hour, if known.
        availability: When the devices or replicas can work: the scenario's
            ``availability`` for the class, else the profile's.
        draft_models: A draft class that drafts: every drafter model it may
            run, in the listed order (one, or the ``hardware_profiles[].model``
            list); empty otherwise.
        engine: A target class: the engine profile its replicas run steps with
            (``hardware_profiles[].engine``); ``None`` for client devices.
        role: A target class: ``colocated``, ``prefill`` or ``decode``
            (``hardware_profiles[].role``; disaggregated serving); client
            devices: ``colocated``.
    """

    id: str
    type: DeviceType
    profile: DeviceProfile
    profile_path: Path
    count: int
    model: str | None
    fused_model: str | None
    tensor_parallel: int
    pipeline_parallel: int
    usd_per_hour: float | None
    availability: Availability
    draft_models: tuple[str, ...] = ()
    engine: EngineProfile | None = None
    role: str = "colocated"

    @property
    def hardware(self) -> str:
        """The LUT hardware id of the class's profile."""
        return self.profile.hardware


@dataclass(frozen=True)
class Link:
    """A symmetric network link between two device classes."""

    src: str
    dst: str
    rtt_ms: float
    bw_mbps: float
    loss_pct: float

    def joins(self, a: str, b: str) -> bool:
        """Return whether the link connects ``a`` and ``b`` (either direction)."""
        return {self.src, self.dst} == {a, b}


@dataclass(frozen=True)
class JitterSpec:
    """Random variation of transfers."""

    enabled: bool
    rtt_sigma_ms: float
    bw_sigma_pct: float


@dataclass(frozen=True)
class PayloadSpec:
    """Bytes per token of each transfer kind."""

    bytes_per_prompt_token: float
    bytes_per_draft_token: float
    bytes_per_result_token: float


@dataclass(frozen=True)
class NetworkSpec:
    """Links, jitter and payload sizes."""

    links: tuple[Link, ...]
    jitter: JitterSpec
    payload: PayloadSpec

    def link_between(self, a: str, b: str) -> Link | None:
        """Return the link joining ``a`` and ``b``, if any."""
        for link in self.links:
            if link.joins(a, b):
                return link
        return None


@dataclass(frozen=True)
class AcceptanceCurve:
    """A named, loaded acceptance model."""

    name: str
    path: Path
    model: AcceptanceModel


@dataclass(frozen=True)
class SpeculationSpec:
    """Mode, models, acceptance curves and draft-length control.

    Attributes:
        mode: The serving mode.
        models: Every declared model, by scenario name.
        acceptance: Every declared acceptance curve, by name.
        k: Draft length of the first round.
        k_min: Smallest k a controller may choose.
        k_max: Largest k a controller may choose.
        temperature: Sampling temperature.
        acceptance_conversion: ``none``, ``tree_as_chain`` or ``chain_as_tree``:
            the rule that lets a curve serve a draft shape it was not measured on.
        request_spread: ``none``, ``from_curve`` or a Beta concentration: the
            per-request acceptance level (see :mod:`simulator.acceptance.spread`).
        k_control: The draft-length controller.
        hybrid: The per-request mode policy (used in hybrid mode).
        tree: The token tree of a fused round (``None``: chains of ``k`` drafts).
    """

    mode: Mode
    models: dict[str, ModelSpec]
    acceptance: dict[str, AcceptanceCurve]
    k: int
    k_min: int
    k_max: int
    temperature: float
    k_control: PolicyChoice
    hybrid: PolicyChoice
    tree: TreeSpec | None = None
    acceptance_conversion: str = "none"
    request_spread: str | float = "none"


@dataclass(frozen=True)
class TreeSpec:
    """A token-tree fused round (``speculation.tree``).

    Attributes:
        depth: Draft levels per round (the round's ``k``).
        width: Candidates per level per sequence.
        nodes: Tokens the target verifies per sequence, root included.
        drafter: The head's LUT (its ``verify`` rows price a level; width 1:
            its ``draft_decode`` rows).
        verifier: The target's LUT (its ``verify`` rows price the tree verify).
    """

    depth: int
    width: int
    nodes: int
    drafter: LaneModel
    verifier: LaneModel

    @property
    def head_phase(self) -> str:
        """The head file's phase whose rows price one level."""
        return "verify" if self.width > 1 else "draft_decode"


def tree_lut_key(model: LaneModel, device: DeviceClass, phase: str) -> LutKey:
    """The LUT key a tree round prices ``phase`` of ``model`` with on ``device``.

    Both the head and the target run on the whole replica (a head file is
    built at the target's tensor-parallel degree, ``lut/README.md``).
    """
    return replica_lut_key(model.model_id, model.dtype, device, phase)


@dataclass(frozen=True)
class MicrobatchSpec:
    """How the verify lane splits one iteration's batch into microbatches.

    Attributes:
        max_microbatch: Most sequences per microbatch.
        fallback: ``none``: consecutive runs of ``max_microbatch`` requests in
            context order; ``per_request``: also split where context lengths
            diverge beyond ``max_context_ratio``.
        max_context_ratio: Longest / shortest context allowed in one
            microbatch with the ``per_request`` fallback.
    """

    max_microbatch: int
    fallback: Literal["per_request", "none"]
    max_context_ratio: float


@dataclass(frozen=True)
class LaneSpec:
    """One lane's batching policy and limits.

    Attributes:
        policy: The lane's batching policy.
        limits: Its size and timeout limits.
        microbatch: Verify lane: how an iteration's batch splits into
            microbatches; ``None`` for the prefill and draft lanes, which have
            no microbatch settings.
    """

    policy: PolicyChoice
    limits: BatchLimits
    microbatch: MicrobatchSpec | None = None


@dataclass(frozen=True)
class LaneModel:
    """A model a lane rule prices its split rounds with (``scheduler.lanes``).

    Attributes:
        model_id: The ``model`` value of its LUT rows.
        lut_path: The LUT file it was loaded from.
        dtype: The dtype of the LUT rows used.
    """

    model_id: str
    lut_path: Path
    dtype: str


def replica_lut_key(
    model_id: str, dtype: str, device: DeviceClass, phase: str, whole_replica: bool = True
) -> LutKey:
    """The LUT key of ``phase`` of a model on ``device``.

    ``whole_replica``: the model runs on all the replica's GPUs (its tensor and
    pipeline degrees); otherwise on one GPU of it (degrees 1).
    """
    return LutKey(
        phase=phase,
        model=model_id,
        hardware=device.hardware,
        tensor_parallel=device.tensor_parallel if whole_replica else 1,
        pipeline_parallel=device.pipeline_parallel if whole_replica else 1,
        dtype=dtype,
    )


def lane_lut_key(model: LaneModel, device: DeviceClass, phase: str) -> LutKey:
    """The LUT key a lane rule prices ``phase`` of ``model`` with on ``device``.

    The draft model's ``draft_decode`` runs on one GPU of the replica (tensor
    and pipeline parallel 1, as the fused LUTs compose it); the target's
    ``verify`` runs on the whole replica.
    """
    return replica_lut_key(
        model.model_id, model.dtype, device, phase, whole_replica=phase != "draft_decode"
    )


@dataclass(frozen=True)
class LanesSpec:
    """How a fused replica's split iterations share its GPU (``scheduler.lanes``).

    Read only under a lane rule of ``scheduler.arbitration`` (one that splits
    fused rounds into draft and verify iterations).

    Attributes:
        split_rounds: Whether the arbitration rule splits fused rounds.
        gpu_sharing: ``serialized`` or ``overlap``.
        overlap_efficiency: Rate of each of two overlapping iterations of
            different bound classes (``overlap`` only); None: the sharing
            measured on an H100 (:mod:`simulator.engine.sharing`).
        host_overhead_ms: Host time per model forward pass.
        drafter: The draft model's LUT (its ``draft_decode`` rows).
        verifier: The target model's LUT (its ``verify`` rows).
    """

    split_rounds: bool = False
    gpu_sharing: GpuSharing = "serialized"
    overlap_efficiency: float | None = None
    host_overhead_ms: float = 0.0
    drafter: LaneModel | None = None
    verifier: LaneModel | None = None


@dataclass(frozen=True)
class PrefixCacheSpec:
    """``scheduler.kv.prefix_cache`` when enabled: every target replica caches prompt blocks.

    Attributes:
        block_tokens: Tokens per cached KV block; a request's block ids (a
            trace's ``hash_ids``) name blocks of this many tokens.
    """

    block_tokens: int = 512


@dataclass(frozen=True)
class SchedulerSpec:
    """Batching, routing, admission and KV behaviour.

    ``draft_selection`` is ``scheduler.draft.model_selection``: the policy
    choosing each request's drafter model among its draft class's models.
    """

    prefill: LaneSpec
    draft: LaneSpec
    verify: LaneSpec
    routing: PolicyChoice
    admission: PolicyChoice
    kv_on_full: KvOnFull
    max_running_requests: int
    arbitration: PolicyChoice
    draft_selection: PolicyChoice
    lanes: LanesSpec = LanesSpec()
    prefix_cache: PrefixCacheSpec | None = None
    """``scheduler.kv.prefix_cache`` (``None``: off)."""
    decode_routing: PolicyChoice | None = None
    """``scheduler.routing.decode``: the router choosing a prefilled request's decode
    replica (``None``: the fleet is colocated)."""


@dataclass(frozen=True)
class Penalties:
    """What energy and unfairness are worth against goodput (``planner.penalties``).

    Attributes:
        energy_per_kj: Good requests one kJ of a window's energy is worth.
        fairness_weight: Share of the goodput lost at the least fair window:
            the goodput is multiplied by ``1 - fairness_weight * (1 - J)``,
            ``J`` Jain's index of the groups' SLO attainment.
        fairness_over: The groups: ``origin`` (client device classes) or
            ``slo_class``.
    """

    energy_per_kj: float = 0.0
    fairness_weight: float = 0.0
    fairness_over: str = "origin"

    def __bool__(self) -> bool:
        return self.energy_per_kj > 0 or self.fairness_weight > 0


@dataclass(frozen=True)
class PlannerSpec:
    """The online goodput planner's settings (see :mod:`simulator.planner.online`).

    Attributes:
        enabled: Whether it runs.
        interval_s: Simulated seconds between planning rounds.
        window_s: Length of each what-if window.
        model_load_s: Time a replica it adds takes before it takes work.
        objectives: What it optimises, in priority order (goodput first).
        candidates: The values it chooses from, by candidate key.
        search: ``grid`` (every candidate each round) or ``hill_climb``.
        analytic_keep: Candidates of a round that get a window, the best by
            the analytic estimate (``None``: all).
        penalties: What energy is worth against goodput.
        hysteresis: Relative gain in the first objective a change must exceed
            over keeping the current configuration.
        min_requests: Fewest requests (in flight and replayed) a round
            decides on; with fewer it keeps the configuration.
        slo_floor: SLO attainment the ``*_at_slo_floor`` objectives require.
        history_s: Past seconds whose busiest ``window_s`` a window replays
            (``window_s``: the last ``window_s``; see :mod:`simulator.planner.forecast`).
        replan_drift: Change in load (relative) or SLO attainment (share) that
            makes a round run its windows (0: every round; see
            :mod:`simulator.planner.trigger`).
    """

    enabled: bool
    interval_s: float
    window_s: float
    objectives: tuple[str, ...]
    candidates: dict[str, tuple[float | str, ...]]
    model_load_s: float = 0.0
    search: str = "grid"
    analytic_keep: int | None = None
    penalties: Penalties = Penalties()
    hysteresis: float = 0.05
    min_requests: int = 20
    slo_floor: float = 0.0
    history_s: float = 10.0
    replan_drift: float = 0.1


@dataclass(frozen=True)
class MetricsSpec:
    """Recording settings."""

    output_dir: str | None
    record_energy: bool
    record_cost: bool
    timeseries_interval_s: float
    warmup_s: float
    electricity_usd_per_kwh: float | None = None


@dataclass(frozen=True)
class SimulationSpec:
    """Run control.

    Attributes:
        until_s: Stop time (``None``: until every request has ended).
        lut_out_of_range: Behaviour of LUT lookups outside the grid.
        fuse_iterations: Advance unchanged decode batches in one event.
        ragged_batches: The context a decode-lane batch is priced at
            (``tail_weighted`` or ``mean``).
        step_noise: Step-time variability (``none`` or ``measured``).
    """

    until_s: float | None
    lut_out_of_range: OutOfRange
    fuse_iterations: bool
    ragged_batches: str = "tail_weighted"
    step_noise: str = "none"


@dataclass(frozen=True)
class Scenario:
    """A fully loaded, validated scenario: everything a run needs, no I/O left.

    Attributes:
        scenario_id: Identifier used in outputs.
        seed: Root seed of every random stream.
        source_file: The file it was loaded from.
        metadata: Descriptive fields.
        workload: The workload specification (trace data already read).
        network: Links, jitter, payload sizes.
        devices: Device classes, in declaration order.
        speculation: Mode, models, acceptance and k control.
        scheduler: Lane, routing, admission and KV policies.
        planner: Planner settings.
        metrics: Recording settings.
        simulation: Run control.
        luts: Every LUT the scenario references, loaded and indexed.
        resolved_json: The scenario document with defaults filled and
            overrides applied, as canonical JSON (see :meth:`resolved`).
        requests: The request table the loader built from the workload and
            seed to check the run's LUT lookups (``simulation.lut_out_of_range:
            raise``), kept so that the run replays it instead of building it
            again (see :mod:`simulator.scenario.requests`); ``None`` when the
            loader built none. Not compared.
        tensor_parallel_classes: For the online planner's ``tensor_parallel``
            candidates, ``(pool, degree)`` -> the target class as it is with
            the profile of that degree (see
            :mod:`simulator.scenario.sections.tensor_parallel`); empty without them.
    """

    scenario_id: str
    seed: int
    source_file: Path
    metadata: Metadata
    workload: WorkloadSpec
    network: NetworkSpec
    devices: tuple[DeviceClass, ...]
    speculation: SpeculationSpec
    scheduler: SchedulerSpec
    planner: PlannerSpec
    metrics: MetricsSpec
    simulation: SimulationSpec
    luts: LutManager
    resolved_json: str
    requests: RequestTable | None = field(default=None, compare=False, repr=False)
    tensor_parallel_classes: Mapping[tuple[str, int], DeviceClass] = field(
        default_factory=dict, compare=False, repr=False
    )

    def resolved(self) -> dict[str, Any]:
        """Return a fresh copy of the resolved scenario document."""
        document: dict[str, Any] = json.loads(self.resolved_json)
        return document

    def device(self, device_id: str) -> DeviceClass:
        """Return the device class ``device_id``."""
        for device in self.devices:
            if device.id == device_id:
                return device
        raise KeyError(f"no device class {device_id!r}")

    def clients(self) -> tuple[DeviceClass, ...]:
        """Return the draft-type (client) device classes."""
        return tuple(d for d in self.devices if d.type == "draft")

    def targets(self) -> tuple[DeviceClass, ...]:
        """Return the target pools."""
        return tuple(d for d in self.devices if d.type == "target")

    def lut_key(self, model: ModelSpec, device: DeviceClass, phase: str) -> LutKey:
        """Return the LUT key of ``model`` running ``phase`` on ``device``."""
        return replica_lut_key(model.model_id, model.dtype, device, phase)
