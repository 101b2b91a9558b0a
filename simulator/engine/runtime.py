"""A scenario resolved once into what a run needs: replicas, client pools, links, settings.

:func:`build_runtime` turns a loaded :class:`~simulator.scenario.Scenario`
into frozen runtime objects: each target replica with its phase costs, KV
capacity, thermal and availability behaviour, price and acceptance curve;
each client device class with its draft-model costs, limits, acceptance
curve and links to target pools; and the settings of the run. The engine
works only from these, never from the scenario, so a what-if window can run
a candidate configuration by building (or editing) a :class:`Runtime`
without a scenario file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from policies.lanes import DECODE, FUSED, VERIFY
from simulator.acceptance import AcceptanceModel
from simulator.devices.engine_profile import step_models
from simulator.devices.model import Availability, AvailabilityWindow, ThermalSpec
from simulator.engine.costs import LaneCosts, PhaseCost, ReplicaCosts
from simulator.engine.step_pricing import StepPricer, TreeShape
from simulator.engine.step_timing import StepTiming
from simulator.engine.tree_costs import TreeRoundCost
from simulator.errors import InputError, make_issue
from simulator.lut import LutKey, LutManager
from simulator.scenario.model import (
    DeviceClass,
    JitterSpec,
    Link,
    ModelSpec,
    PayloadSpec,
    PolicyChoice,
    Scenario,
    SchedulerSpec,
    lane_lut_key,
    tree_lut_key,
)
from simulator.workload.closed_loop import ClosedLoop

MB_PER_GB = 1024.0


@dataclass(frozen=True)
class ReplicaPlan:
    """One target replica, resolved.

    Attributes:
        pool: The target class (pool) it belongs to.
        costs: Its phase costs by kind of work.
        kv_capacity_mb: Its KV-cache budget.
        kv_mb_per_token: KV per token of context, by kind of work.
        thermal: Its sustained-load slowdown (``None``: none).
        availability: When it can work.
        gpus: GPUs in the replica.
        fused_acceptance: Acceptance curve of its fused model (fused and hybrid modes).
        lane_costs: The split draft and verify costs of a fused round under a
            lane rule of ``scheduler.arbitration`` (``None``: whole rounds).
        role: The work new requests bring it (see :data:`ROLE_MODES`): ``both``
            unless a planner's draft/verify split gave it ``draft`` or ``verify``.
        tensor_parallel: Its tensor-parallel degree (its profile's).
        serves: ``colocated`` (it prefills and decodes), ``prefill`` or
            ``decode`` (``hardware_profiles[].role``: disaggregated serving).
    """

    pool: str
    costs: ReplicaCosts
    kv_capacity_mb: float
    kv_mb_per_token: Mapping[str, float]
    thermal: ThermalSpec | None
    availability: Availability
    gpus: int
    fused_acceptance: AcceptanceModel | None
    lane_costs: LaneCosts | None = None
    role: str = "both"
    tensor_parallel: int = 1
    serves: str = "colocated"


NEVER_S = 1e15
"""End of a loading replica's availability (later than any run)."""


def loading_plan(plan: ReplicaPlan, ready_s: float) -> ReplicaPlan:
    """``plan`` for a replica that takes work from ``ready_s`` on (it loads its model until then).

    Work routed to it before waits. A pool with availability windows of its
    own keeps them.
    """
    if plan.availability.kind != "always":
        return plan
    window = AvailabilityWindow(ready_s, NEVER_S)
    return replace(plan, availability=Availability("windows", NEVER_S, (window,)))


ROLE_MODES: Mapping[str, frozenset[str]] = {
    "both": frozenset({"none", "fused", "distributed"}),
    "draft": frozenset({"fused"}),
    "verify": frozenset({"distributed"}),
}
"""The request modes a replica of each role is routed (hybrid mode's draft/verify split):
``draft`` replicas draft on the server (fused requests), ``verify`` replicas verify the
bundles client devices draft, ``both`` (every replica without a split) serve either."""


@dataclass(frozen=True)
class DraftModelPlan:
    """One drafter model a client device class may run, resolved.

    Attributes:
        name: The model's scenario name.
        prefill: Its prefill cost on the device.
        draft: Its draft-decode cost on the device.
        acceptance: Its acceptance curve.
        weights_mb: Its memory on the device besides KV (its prefill LUT's
            peak memory less KV at the smallest grid point).
    """

    name: str
    prefill: PhaseCost
    draft: PhaseCost
    acceptance: AcceptanceModel | None
    weights_mb: float


@dataclass(frozen=True)
class ClientPool:
    """One class of client devices, resolved.

    Attributes:
        id: The class id.
        count: Devices in the class.
        models: The drafter models a device may run, in the listed order
            (empty: it drafts nothing); each request drafts with one of them.
        max_concurrent: Requests one device serves at once.
        thermal: Sustained-load slowdown of one device.
        availability: When a device can work.
        kv_limit_mb: KV budget of one device (``None``: unlimited).
        links: Its link to each target pool it reaches, by pool id.
    """

    id: str
    count: int
    models: tuple[DraftModelPlan, ...]
    max_concurrent: int
    thermal: ThermalSpec | None
    availability: Availability
    kv_limit_mb: float | None
    links: Mapping[str, Link]

    @property
    def prefill(self) -> PhaseCost | None:
        """Prefill cost of its first (default) drafter model (``None``: it drafts nothing)."""
        return self.models[0].prefill if self.models else None

    @property
    def draft(self) -> PhaseCost | None:
        """Draft-decode cost of its first (default) drafter model."""
        return self.models[0].draft if self.models else None

    @property
    def acceptance(self) -> AcceptanceModel | None:
        """Acceptance curve of its first (default) drafter model."""
        return self.models[0].acceptance if self.models else None


@dataclass(frozen=True)
class ClassInfo:
    """What the metrics need of a device class besides what its units did.

    Attributes:
        id: The class id.
        type: ``target`` or ``draft``.
        units: Replicas or devices in the class.
        gpus: GPUs of all its units (0 for draft devices).
        lut_keys: LUT keys its units price their work with.
        idle_power_w: Idle power of one unit, if known.
        active_power_w: Power of one unit while working, if known (prices
            busy time where the LUT has no energy).
        usd_per_hour: Price of one unit per hour, if known.
    """

    id: str
    type: str
    units: int
    gpus: int
    lut_keys: tuple[LutKey, ...]
    idle_power_w: float | None
    active_power_w: float | None
    usd_per_hour: float | None


@dataclass(frozen=True)
class RunSettings:
    """Everything else a run is configured by.

    Attributes:
        mode: Serving mode.
        k: Draft length of a request's first round.
        k_min: Smallest k a controller may choose.
        k_max: Largest k a controller may choose.
        temperature: Sampling temperature (acceptance bins).
        request_spread: ``speculation.request_spread``: ``none``, ``from_curve``
            or a Beta concentration.
        k_control: The draft-length controller.
        hybrid: The per-request mode policy (hybrid mode).
        scheduler: Lane, routing, admission, arbitration and KV settings.
        payload: Bytes per token of each transfer kind.
        jitter: Random variation of transfers.
        fuse_iterations: Advance unchanged decode runs in one event.
        until_s: Stop time (``None``: until every request has ended).
        timeseries_interval_s: Sampling period of the time series.
        closed_loop: Closed-loop users (``None``: replay arrival times).
        draft_selection: The per-request drafter-model policy (``None``
            when no client class has more than one drafter model).
        step_timing: The ragged-batch rule and step-time noise
            (``simulation.ragged_batches``, ``simulation.step_noise``).
        tree: The token tree of fused rounds (``speculation.tree``; ``None``:
            chains of ``k`` drafts).
    """

    mode: str
    k: int
    k_min: int
    k_max: int
    temperature: float
    k_control: PolicyChoice
    hybrid: PolicyChoice | None
    scheduler: SchedulerSpec
    payload: PayloadSpec
    jitter: JitterSpec
    fuse_iterations: bool
    until_s: float | None
    timeseries_interval_s: float
    closed_loop: ClosedLoop | None
    draft_selection: PolicyChoice | None = None
    step_timing: StepTiming = field(default_factory=StepTiming.default)
    request_spread: str | float = "none"
    tree: TreeShape | None = None


@dataclass(frozen=True)
class Runtime:
    """A scenario resolved for the engine (see the module docstring).

    Attributes:
        settings: Run settings.
        replicas: Every target replica, pools in scenario order.
        clients: Client device classes by id.
        classes: Every device class, in scenario order, for the metrics.
        luts: The LUT manager (to tell which keys carry energy data).
        tensor_parallel_plans: ``(pool, degree)`` -> a replica of the pool at
            that tensor-parallel degree (the online planner's
            ``tensor_parallel`` candidates; empty without them).
        kv_links: ``(prefill pool, decode pool)`` -> the link carrying KV
            between them (disaggregated serving; empty without it).
    """

    settings: RunSettings
    replicas: tuple[ReplicaPlan, ...]
    clients: Mapping[str, ClientPool]
    classes: tuple[ClassInfo, ...]
    luts: LutManager
    tensor_parallel_plans: Mapping[tuple[str, int], ReplicaPlan] = field(default_factory=dict)
    kv_links: Mapping[tuple[str, str], Link] = field(default_factory=dict)


class _Resolver:
    """Builds the runtime objects of one scenario, sharing phase costs between them."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.mode = scenario.speculation.mode
        self._costs: dict[tuple[str, str, int, int, str], PhaseCost] = {}

    def cost(self, model: ModelSpec, device: DeviceClass, phase: str) -> PhaseCost:
        key = (model.name, device.id, device.tensor_parallel, device.pipeline_parallel, phase)
        cost = self._costs.get(key)
        if cost is None:
            scenario = self.scenario
            lut_key = scenario.lut_key(model, device, phase)
            cost = PhaseCost(
                scenario.luts,
                lut_key,
                scenario.simulation.lut_out_of_range,
                step_pricer(device, lut_key),
            )
            self._costs[key] = cost
        return cost

    def acceptance(self, model_name: str | None) -> AcceptanceModel | None:
        spec = self.scenario.speculation
        model = spec.models.get(model_name or "")
        if model is None or model.acceptance is None or model.acceptance not in spec.acceptance:
            return None
        return spec.acceptance[model.acceptance].model

    def replica(self, device: DeviceClass) -> ReplicaPlan:
        models = self.scenario.speculation.models
        mode = self.mode
        verifier = models[device.model] if device.model else None
        fused = models[device.fused_model] if device.fused_model else None
        costs = ReplicaCosts(
            prefill_verifier=self.cost(verifier, device, "prefill") if verifier else None,
            prefill_fused=self.cost(fused, device, "prefill") if fused else None,
            decode=self.cost(verifier, device, "draft_decode")
            if verifier and (mode == "none" or self.scenario.speculation.k_min == 0)
            else None,
            verify=self.cost(verifier, device, "verify")
            if verifier and mode in ("distributed", "hybrid")
            else None,
            fused=(self.tree_cost(fused, device) or self.cost(fused, device, "fused_decode"))
            if fused
            else None,
        )
        per_token: dict[str, float] = {}
        static_mb = 0.0
        for kind, prefill in ((VERIFY, costs.prefill[VERIFY]), (FUSED, costs.prefill[FUSED])):
            if prefill is not None:
                per_token[kind] = prefill.kv_mb_per_token()
                static_mb = max(static_mb, prefill.static_mem_mb())
        if VERIFY in per_token:
            per_token[DECODE] = per_token[VERIFY]
        return ReplicaPlan(
            pool=device.id,
            costs=costs,
            kv_capacity_mb=_kv_capacity_mb(device, static_mb),
            kv_mb_per_token=per_token,
            thermal=device.profile.compute.thermal,
            availability=device.availability,
            gpus=device.profile.compute.gpus_per_replica,
            fused_acceptance=self.acceptance(device.fused_model) if fused else None,
            lane_costs=self.lane_costs(device),
            tensor_parallel=device.tensor_parallel,
            serves=device.role,
        )

    def tree_cost(self, fused: ModelSpec, device: DeviceClass) -> TreeRoundCost | None:
        """The token-tree round of ``speculation.tree`` on ``device`` (``None``: chains)."""
        scenario = self.scenario
        tree = scenario.speculation.tree
        if tree is None:
            return None
        shape = TreeShape(tree.depth, tree.width, tree.nodes)
        key = scenario.lut_key(fused, device, "fused_decode")
        pricer = None
        if device.engine is not None:
            idle_w = device.profile.energy.idle_power_w or 0.0
            models = (tree.verifier.model_id, tree.drafter.model_id)
            pricer = StepPricer(device.engine, "fused_decode", models, idle_w, tree=shape)
        return TreeRoundCost(
            scenario.luts,
            key,
            scenario.simulation.lut_out_of_range,
            pricer,
            tree_lut_key(tree.drafter, device, tree.head_phase),
            tree_lut_key(tree.verifier, device, "verify"),
            shape,
        )

    def lane_costs(self, device: DeviceClass) -> LaneCosts | None:
        """The split draft and verify costs of a lane rule's rounds (else ``None``)."""
        scenario = self.scenario
        lanes = scenario.scheduler.lanes
        if not lanes.split_rounds or device.fused_model is None:
            return None
        assert lanes.drafter is not None and lanes.verifier is not None
        out_of_range = scenario.simulation.lut_out_of_range
        draft_key = lane_lut_key(lanes.drafter, device, "draft_decode")
        verify_key = lane_lut_key(lanes.verifier, device, "verify")
        return LaneCosts(
            draft=PhaseCost(scenario.luts, draft_key, out_of_range, step_pricer(device, draft_key)),
            verify=PhaseCost(
                scenario.luts, verify_key, out_of_range, step_pricer(device, verify_key)
            ),
        )

    def client(self, device: DeviceClass) -> ClientPool:
        scenario = self.scenario
        models: list[DraftModelPlan] = []
        if self.mode in ("distributed", "hybrid"):
            for name in device.draft_models:
                model = scenario.speculation.models[name]
                prefill = self.cost(model, device, "prefill")
                models.append(
                    DraftModelPlan(
                        name,
                        prefill,
                        self.cost(model, device, "draft_decode"),
                        self.acceptance(name),
                        prefill.static_mem_mb(),
                    )
                )
        links: dict[str, Link] = {}
        for target in scenario.targets():
            link = scenario.network.link_between(device.id, target.id)
            if link is not None:
                links[target.id] = link
        compute = device.profile.compute
        return ClientPool(
            id=device.id,
            count=device.count,
            models=tuple(models),
            max_concurrent=compute.max_concurrent_requests or 1,
            thermal=compute.thermal,
            availability=device.availability,
            kv_limit_mb=device.profile.memory.kv_cache_limit_mb,
            links=links,
        )

    def class_info(self, device: DeviceClass, plan: ReplicaPlan | ClientPool) -> ClassInfo:
        if isinstance(plan, ReplicaPlan):
            costs = [*plan.costs.prefill.values(), *plan.costs.step.values()]
            gpus = plan.gpus * device.count
        else:
            costs = [cost for m in plan.models for cost in (m.prefill, m.draft)]
            gpus = 0
        keys = tuple(dict.fromkeys(cost.key for cost in costs if cost is not None))
        return ClassInfo(
            id=device.id,
            type=device.type,
            units=device.count,
            gpus=gpus,
            lut_keys=keys,
            idle_power_w=device.profile.energy.idle_power_w,
            active_power_w=device.profile.energy.active_power_w,
            usd_per_hour=device.usd_per_hour,
        )


def step_pricer(device: DeviceClass, key: LutKey) -> StepPricer | None:
    """How a target class's engine runs the steps of ``key`` (``None`` on client devices)."""
    if device.engine is None:
        return None
    idle_w = device.profile.energy.idle_power_w
    return StepPricer(device.engine, key.phase, step_models(key.phase, key.model), idle_w or 0.0)


def _kv_capacity_mb(device: DeviceClass, static_mb: float) -> float:
    """A target replica's KV budget: the profile's limit, or its memory less the model."""
    memory = device.profile.memory
    limit = memory.kv_cache_limit_mb
    if limit is not None:
        return float(limit)
    total_mb = (memory.device_memory_gb or 0.0) * MB_PER_GB
    capacity = total_mb - static_mb
    if capacity <= 0:
        raise InputError(
            [
                make_issue(
                    device.profile_path,
                    "memory.device_memory_gb",
                    memory.device_memory_gb,
                    f"enough memory for the model ({static_mb:.0f} MB of weights and activations per replica)",
                    f"no room for a KV cache on {device.id}",
                )
            ]
        )
    return capacity


def build_runtime(scenario: Scenario) -> Runtime:
    """Resolve ``scenario`` into the runtime objects a run works from.

    Raises:
        InputError: A target replica has no memory left for a KV cache.
    """
    resolver = _Resolver(scenario)
    replicas: list[ReplicaPlan] = []
    clients: dict[str, ClientPool] = {}
    classes: list[ClassInfo] = []
    for device in scenario.devices:
        if device.type == "target":
            plan = resolver.replica(device)
            replicas.extend([plan] * device.count)
            classes.append(resolver.class_info(device, plan))
        else:
            pool = clients[device.id] = resolver.client(device)
            classes.append(resolver.class_info(device, pool))
    spec = scenario.speculation
    settings = RunSettings(
        mode=spec.mode,
        k=spec.k,
        k_min=spec.k_min,
        k_max=spec.k_max,
        temperature=spec.temperature,
        request_spread=spec.request_spread,
        k_control=spec.k_control,
        hybrid=spec.hybrid if spec.mode == "hybrid" else None,
        scheduler=scenario.scheduler,
        payload=scenario.network.payload,
        jitter=scenario.network.jitter,
        fuse_iterations=scenario.simulation.fuse_iterations,
        until_s=scenario.simulation.until_s,
        timeseries_interval_s=scenario.metrics.timeseries_interval_s,
        closed_loop=scenario.workload.closed_loop,
        draft_selection=scenario.scheduler.draft_selection
        if any(len(pool.models) > 1 for pool in clients.values())
        else None,
        step_timing=StepTiming.of(
            scenario.simulation.ragged_batches, scenario.simulation.step_noise
        ),
        tree=TreeShape(spec.tree.depth, spec.tree.width, spec.tree.nodes)
        if spec.tree is not None
        else None,
    )
    plans = {
        key: resolver.replica(device) for key, device in scenario.tensor_parallel_classes.items()
    }
    return Runtime(
        settings,
        tuple(replicas),
        clients,
        tuple(classes),
        scenario.luts,
        plans,
        _kv_links(scenario),
    )


def _kv_links(scenario: Scenario) -> dict[tuple[str, str], Link]:
    """The links between prefill and decode pools, by (prefill pool, decode pool)."""
    roles = {d.id: d.role for d in scenario.devices if d.type == "target"}
    out: dict[tuple[str, str], Link] = {}
    for link in scenario.network.links:
        if roles.get(link.src) == "prefill" and roles.get(link.dst) == "decode":
            out[(link.src, link.dst)] = link
        elif roles.get(link.dst) == "prefill" and roles.get(link.src) == "decode":
            out[(link.dst, link.src)] = link
    return out
