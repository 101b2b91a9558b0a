"""The loaded form of a device profile: a tree of frozen dataclasses.

A :class:`DeviceProfile` describes one class of hardware: a client device that
drafts tokens and originates requests (role ``draft``) or one serving replica
of a target pool (role ``target``, ``tensor_parallel x pipeline_parallel``
GPUs). Values the data do not give are ``None``; every number the profile holds
carries a citation (see :attr:`DeviceProfile.sources`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

DeviceRole = Literal["draft", "target"]
LinkLabel = Literal["wifi", "cellular", "ethernet", "datacenter"]
AvailabilityKind = Literal["always", "windows"]


@dataclass(frozen=True)
class ParallelismLimits:
    """Largest parallel degrees a replica of this hardware may use (``None``: not stated)."""

    max_tensor_parallel: int | None
    max_pipeline_parallel: int | None
    max_gpus_per_replica: int | None


@dataclass(frozen=True)
class ThermalSpec:
    """Sustained-load slowdown of a device.

    Attributes:
        throttle_factor: Throughput once throttled as a fraction of the
            unthrottled throughput, in (0, 1]; iteration latencies are divided by it.
        throttle_after_s: Seconds of continuous work before throttling starts;
            ``None`` when the onset is not known, in which case the device is
            treated as throttled from the start (its sustained rate).
        onset_benchmark_iterations: Informational: benchmark iterations after
            which the throttled rate was observed.
    """

    throttle_factor: float
    throttle_after_s: float | None
    onset_benchmark_iterations: int | None

    def latency_scale(self, busy_s: float) -> float:
        """Return the factor to multiply an iteration latency by after ``busy_s`` of work."""
        if self.throttle_after_s is None or busy_s >= self.throttle_after_s:
            return 1.0 / self.throttle_factor
        return 1.0


@dataclass(frozen=True)
class ComputeSpec:
    """How a device computes.

    Attributes:
        lut_ids: Model ids the device is expected to run (informational).
        max_concurrent_requests: Draft devices: requests served at once
            (``None`` for targets).
        tensor_parallel: TP degree of one replica (1 for draft devices).
        pipeline_parallel: PP degree of one replica (1 for draft devices).
        gpus_per_replica: ``tensor_parallel * pipeline_parallel`` (1 for draft devices).
        parallelism_limits: Targets: limits for planners; ``None`` if not stated.
        thermal: Sustained-load slowdown; ``None`` if none is known.
    """

    lut_ids: tuple[str, ...]
    max_concurrent_requests: int | None
    tensor_parallel: int
    pipeline_parallel: int
    gpus_per_replica: int
    parallelism_limits: ParallelismLimits | None
    thermal: ThermalSpec | None


@dataclass(frozen=True)
class KvCapacityPoint:
    """A measured KV-cache capacity of one model on this hardware (informational)."""

    model: str
    tensor_parallel: int
    pipeline_parallel: int
    max_num_tokens: int
    source: str


@dataclass(frozen=True)
class MemorySpec:
    """Memory of one device or replica (``None``: not known).

    Attributes:
        device_memory_gb: Total memory of the device or the whole replica, in GB.
        gpu_memory_gb: Targets: memory of one GPU, in GB.
        bandwidth_gb_per_s: Memory bandwidth of one device (one GPU for targets).
        kv_cache_limit_mb: KV-cache budget in MB. When ``None``, a target's
            budget is derived by the engine from memory minus model weights and
            a draft device's KV memory is not limited.
        kv_capacity_reference: Measured capacities to check a derived budget against.
    """

    device_memory_gb: float | None
    gpu_memory_gb: float | None
    bandwidth_gb_per_s: float | None
    kv_cache_limit_mb: float | None
    kv_capacity_reference: tuple[KvCapacityPoint, ...]


@dataclass(frozen=True)
class CollectiveFit:
    """Time of one NCCL collective among ``num_workers`` GPUs of one node.

    ``time_ms(size) = latency_ms + size_bytes / (bandwidth_gb_per_s * 1e6)``.

    Attributes:
        num_workers: GPUs taking part.
        latency_floor_ms: Smallest measured time over all message sizes.
        latency_ms: Fitted fixed cost of one collective.
        bandwidth_gb_per_s: Fitted algorithm bandwidth (message bytes per second / 1e9).
        bus_bandwidth_gb_per_s: NCCL bus bandwidth (informational).
        source: Citation of the numbers.
    """

    num_workers: int
    latency_floor_ms: float
    latency_ms: float
    bandwidth_gb_per_s: float
    bus_bandwidth_gb_per_s: float
    source: str

    def time_ms(self, size_bytes: float) -> float:
        """Return the modelled time of one collective on a ``size_bytes`` message, in ms."""
        fitted = self.latency_ms + size_bytes / (self.bandwidth_gb_per_s * 1e6)
        return max(self.latency_floor_ms, fitted)


@dataclass(frozen=True)
class Interconnect:
    """GPU-to-GPU collectives inside one node of a target."""

    all_reduce: tuple[CollectiveFit, ...]
    send_recv: tuple[CollectiveFit, ...]

    def all_reduce_fit(self, num_workers: int) -> CollectiveFit | None:
        """Return the all-reduce fit for ``num_workers`` GPUs, or ``None`` if not profiled."""
        return next((f for f in self.all_reduce if f.num_workers == num_workers), None)

    def send_recv_fit(self, num_workers: int = 2) -> CollectiveFit | None:
        """Return the send/recv fit for ``num_workers`` GPUs, or ``None`` if not profiled."""
        return next((f for f in self.send_recv if f.num_workers == num_workers), None)


@dataclass(frozen=True)
class NetworkSpec:
    """Network attachment: a link label and, for targets, the GPU interconnect."""

    default_link: LinkLabel
    interconnect: Interconnect | None


@dataclass(frozen=True)
class AvailabilityWindow:
    """An interval ``[start_s, end_s)`` within the availability period."""

    start_s: float
    end_s: float


@dataclass(frozen=True)
class Availability:
    """When a device can work.

    Attributes:
        kind: ``always`` or ``windows``.
        period_s: ``windows``: length of the repeating period in s.
        windows: ``windows``: sorted, non-overlapping available intervals.
    """

    kind: AvailabilityKind
    period_s: float | None
    windows: tuple[AvailabilityWindow, ...]

    def is_available(self, time_s: float) -> bool:
        """Return whether the device is available at simulated time ``time_s``."""
        if self.kind == "always" or self.period_s is None:
            return True
        phase = self._cycle(time_s)[1]
        return any(w.start_s <= phase < w.end_s for w in self.windows)

    def next_available_s(self, time_s: float) -> float:
        """Return the earliest time ``>= time_s`` at which the device is available.

        :meth:`is_available` holds at the returned time (floating-point
        rounding of a period boundary never makes the two disagree).
        """
        if self.kind == "always" or self.period_s is None or not self.windows:
            return time_s
        cycle_start, phase = self._cycle(time_s)
        found = cycle_start + self.period_s + self.windows[0].start_s
        for window in self.windows:
            if phase < window.end_s:
                found = time_s if phase >= window.start_s else cycle_start + window.start_s
                break
        return self._settle(found, want_available=True)

    def next_unavailable_s(self, time_s: float) -> float:
        """Return the earliest time ``>= time_s`` at which the device is unavailable (inf: never).

        Windows that touch (one ends where the next begins, across the
        period's end too) count as one. :meth:`is_available` is false at the
        returned time (when finite).
        """
        if self.kind == "always" or self.period_s is None or not self.windows:
            return math.inf
        windows = self.windows
        cycle_start, phase = self._cycle(time_s)
        index = next((i for i, w in enumerate(windows) if w.start_s <= phase < w.end_s), None)
        if index is None:
            return time_s
        if self._covers_period():
            return math.inf
        while True:  # follow touching windows to the first gap
            following = index + 1
            if following < len(windows) and windows[following].start_s <= windows[index].end_s:
                index = following
            elif (
                following == len(windows)
                and windows[index].end_s >= self.period_s
                and windows[0].start_s <= 0.0
            ):
                cycle_start += self.period_s
                index = 0
            else:
                break
        return self._settle(cycle_start + windows[index].end_s, want_available=False)

    def _covers_period(self) -> bool:
        """Whether the windows, touching one another, cover the whole period."""
        assert self.period_s is not None
        reach = 0.0
        for window in self.windows:
            if window.start_s > reach:
                return False
            reach = max(reach, window.end_s)
        return reach >= self.period_s

    def _cycle(self, time_s: float) -> tuple[float, float]:
        """The start of the period holding ``time_s`` and its phase in ``[0, period_s)``."""
        period = self.period_s
        assert period is not None
        cycle_start = math.floor(time_s / period) * period
        phase = time_s - cycle_start
        if phase < 0.0:  # the division rounded up across a boundary
            cycle_start -= period
        elif phase >= period:  # ... or down
            cycle_start += period
        return cycle_start, time_s - cycle_start

    def _settle(self, time_s: float, *, want_available: bool) -> float:
        """Step ``time_s`` up by ulps until :meth:`is_available` says ``want_available``.

        A boundary computed as start + phase may land a rounding step short
        of the period it belongs to; a few ulps always reach it.
        """
        for _ in range(64):
            if self.is_available(time_s) == want_available:
                return time_s
            time_s = math.nextafter(time_s, math.inf)
        raise AssertionError(f"availability boundary not reached near {time_s!r}")


@dataclass(frozen=True)
class EnergySpec:
    """Electrical power, where measured (``None``: not known).

    Attributes:
        active_power_w: Average power of the whole device or replica while working.
        active_power_w_per_gpu: Targets: the same per GPU.
        idle_power_w: Power while idle.
        power_limit_w: Configured power mode or budget (a cap, not a measurement).
        power_measurement: What the figures measure.
    """

    active_power_w: float | None
    active_power_w_per_gpu: float | None
    idle_power_w: float | None
    power_limit_w: float | None
    power_measurement: str


@dataclass(frozen=True)
class CostSpec:
    """Price of one device or replica per hour in USD (``None``: set it in the scenario)."""

    usd_per_hour: float | None


@dataclass(frozen=True)
class CalibrationPoint:
    """One measured throughput fact on this hardware, for calibrating LUTs.

    Attributes:
        model: Model as named in the data.
        model_id: The project's model id when it is one of them, else ``None``.
        engine: Inference engine.
        quant: Weight format or quantisation.
        condition: Conditions of the measurement.
        batch_size: Average number of sequences decoded together.
        context_len: Context length in tokens, if stated.
        decode_tok_s: Generated tokens per second summed over the batch.
        prefill_tok_s: Prompt tokens per second, if measured.
        itl_ms: Inter-token latency of one sequence, if measured.
        power_w: Average power (whole replica for targets), if measured.
        energy_per_token_j: Energy per generated token, if measured.
        source: Citation of every number of the entry.
    """

    model: str
    model_id: str | None
    engine: str
    quant: str
    condition: str
    batch_size: float | None
    context_len: int | None
    decode_tok_s: float
    prefill_tok_s: float | None
    itl_ms: float | None
    power_w: float | None
    energy_per_token_j: float | None
    source: str


@dataclass(frozen=True)
class DeviceProfile:
    """One device class (role ``draft``) or one target replica (role ``target``).

    Attributes:
        id: Profile id (the file name without ``.yaml``).
        name: Human-readable name.
        vendor: Maker.
        role: ``draft`` or ``target``.
        hardware: The LUT ``hardware`` id.
        compute: Parallelism, concurrency, thermal behaviour.
        memory: Memory sizes and KV budget.
        network: Link label and GPU interconnect.
        availability: When the device can work.
        energy: Power figures.
        cost: Price (usually ``None``; scenarios supply it).
        sources: ``(key path, citation)`` pairs, in file order.
        notes: Free text.
        calibration: Measured throughput facts.
        source_file: The file the profile was loaded from, if any.
    """

    id: str
    name: str
    vendor: str
    role: DeviceRole
    hardware: str
    compute: ComputeSpec
    memory: MemorySpec
    network: NetworkSpec
    availability: Availability
    energy: EnergySpec
    cost: CostSpec
    sources: tuple[tuple[str, str], ...]
    notes: str
    calibration: tuple[CalibrationPoint, ...] = ()
    source_file: str | None = None

    @property
    def is_target(self) -> bool:
        """Whether the profile is a serving replica (role ``target``)."""
        return self.role == "target"

    @property
    def is_draft(self) -> bool:
        """Whether the profile is a client device that drafts (role ``draft``)."""
        return self.role == "draft"

    @property
    def gpus_per_replica(self) -> int:
        """GPUs in one replica (1 for a draft device)."""
        return self.compute.gpus_per_replica

    def source_of(self, key: str) -> str | None:
        """Return the citation of the numeric value at key path ``key``, if any."""
        return next((text for path, text in self.sources if path == key), None)
