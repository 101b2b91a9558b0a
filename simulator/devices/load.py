"""Reading a device profile file into a :class:`~simulator.devices.model.DeviceProfile`.

The file is parsed (YAML or JSON), validated against
``simulator/schemas/device_profile.schema.json``, completed with the schema's
defaults and checked with the cross-field rules of
:mod:`simulator.devices.checks`. Every problem found is reported in one
:class:`~simulator.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from simulator.built_files import BuiltFromFiles
from simulator.devices.checks import cross_field_issues, id_issues, source_issues
from simulator.devices.model import (
    Availability,
    AvailabilityKind,
    AvailabilityWindow,
    CalibrationPoint,
    CollectiveFit,
    ComputeSpec,
    CostSpec,
    DeviceProfile,
    DeviceRole,
    EnergySpec,
    Interconnect,
    KvCapacityPoint,
    LinkLabel,
    MemorySpec,
    NetworkSpec,
    ParallelismLimits,
    ThermalSpec,
)
from simulator.errors import InputError, Issue
from simulator.input_files import read_bounded
from simulator.loading import fill_defaults, load_packaged_schema, parse_document, schema_issues

SCHEMA_NAME = "device_profile.schema.json"
"""The packaged JSON Schema of device profiles."""
WHAT = "device profile"
PROFILE_CACHE_SIZE = 64
"""Most profiles kept (by file name and content) for the runs of a process to share."""
_PROFILES: BuiltFromFiles[DeviceProfile] = BuiltFromFiles(PROFILE_CACHE_SIZE)


def load_device_profile(path: Path) -> DeviceProfile:
    """Load and check one device profile.

    Args:
        path: A ``.yaml``/``.yml`` or ``.json`` profile whose name (without
            extension) equals its ``id``.

    Returns:
        The profile, with schema defaults filled in.

    Raises:
        InputError: With every problem of the file, each naming the file, the
            key path, the bad value and what is allowed.
    """
    path = Path(path)
    data = read_bounded(path, WHAT)
    return _PROFILES.load(str(path), data, lambda: _build(path, data))


def _build(path: Path, data: bytes) -> DeviceProfile:
    """Check a profile file's bytes and build its profile."""
    raw = parse_document(path, data, WHAT)
    schema = load_packaged_schema(SCHEMA_NAME)
    schema_problems = schema_issues(raw, schema, path)
    issues: list[Issue] = schema_problems + id_issues(raw, path)
    cited = source_issues(raw, path, report_unused=not schema_problems)
    issues += _not_under(cited, {issue.key_path for issue in schema_problems})
    if issues:
        raise InputError(issues)
    document = fill_defaults(raw, schema)
    issues = cross_field_issues(raw, document, path)
    if issues:
        raise InputError(issues)
    return build_profile(document, str(path))


def load_device_profiles(paths: Iterable[Path]) -> tuple[DeviceProfile, ...]:
    """Load several profiles, reporting the problems of all files together.

    Raises:
        InputError: With every problem of every file.
    """
    profiles: list[DeviceProfile] = []
    issues: list[Issue] = []
    for path in paths:
        try:
            profiles.append(load_device_profile(path))
        except InputError as error:
            issues.extend(error.issues)
    if issues:
        raise InputError(issues)
    return tuple(profiles)


def _not_under(issues: list[Issue], reported: set[str]) -> list[Issue]:
    """Drop issues about values at, or inside, key paths that already have a problem."""

    def covered(path: str) -> bool:
        return any(
            path == done or path.startswith((f"{done}.", f"{done}[")) for done in reported if done
        )

    return [issue for issue in issues if not covered(issue.key_path)]


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _compute(section: Mapping[str, Any]) -> ComputeSpec:
    limits = section["parallelism_limits"]
    thermal = section["thermal"]
    return ComputeSpec(
        lut_ids=tuple(section["lut_ids"]),
        max_concurrent_requests=_opt_int(section["max_concurrent_requests"]),
        tensor_parallel=int(section["tensor_parallel"]),
        pipeline_parallel=int(section["pipeline_parallel"]),
        gpus_per_replica=int(section["gpus_per_replica"]),
        parallelism_limits=None
        if limits is None
        else ParallelismLimits(
            max_tensor_parallel=_opt_int(limits["max_tensor_parallel"]),
            max_pipeline_parallel=_opt_int(limits["max_pipeline_parallel"]),
            max_gpus_per_replica=_opt_int(limits["max_gpus_per_replica"]),
        ),
        thermal=None
        if thermal is None
        else ThermalSpec(
            throttle_factor=float(thermal["throttle_factor"]),
            throttle_after_s=_opt_float(thermal["throttle_after_s"]),
            onset_benchmark_iterations=_opt_int(thermal["onset_benchmark_iterations"]),
        ),
    )


def _memory(section: Mapping[str, Any]) -> MemorySpec:
    return MemorySpec(
        device_memory_gb=_opt_float(section["device_memory_gb"]),
        gpu_memory_gb=_opt_float(section["gpu_memory_gb"]),
        bandwidth_gb_per_s=_opt_float(section["bandwidth_gb_per_s"]),
        kv_cache_limit_mb=_opt_float(section["kv_cache_limit_mb"]),
        kv_capacity_reference=tuple(
            KvCapacityPoint(
                model=str(item["model"]),
                tensor_parallel=int(item["tensor_parallel"]),
                pipeline_parallel=int(item["pipeline_parallel"]),
                max_num_tokens=int(item["max_num_tokens"]),
                source=str(item["source"]),
            )
            for item in section["kv_capacity_reference"]
        ),
    )


def _fit(item: Mapping[str, Any]) -> CollectiveFit:
    return CollectiveFit(
        num_workers=int(item["num_workers"]),
        latency_floor_ms=float(item["latency_floor_ms"]),
        latency_ms=float(item["latency_ms"]),
        bandwidth_gb_per_s=float(item["bandwidth_gb_per_s"]),
        bus_bandwidth_gb_per_s=float(item["bus_bandwidth_gb_per_s"]),
        source=str(item["source"]),
    )


def _network(section: Mapping[str, Any]) -> NetworkSpec:
    interconnect = section["interconnect"]
    return NetworkSpec(
        default_link=cast(LinkLabel, section["default_link"]),
        interconnect=None
        if interconnect is None
        else Interconnect(
            all_reduce=tuple(_fit(item) for item in interconnect["all_reduce"]),
            send_recv=tuple(_fit(item) for item in interconnect["send_recv"]),
        ),
    )


def build_availability(section: Mapping[str, Any]) -> Availability:
    """Turn a checked, default-filled ``availability`` block into an :class:`Availability`."""
    return Availability(
        kind=cast(AvailabilityKind, section["kind"]),
        period_s=_opt_float(section["period_s"]),
        windows=tuple(
            AvailabilityWindow(float(w["start_s"]), float(w["end_s"])) for w in section["windows"]
        ),
    )


def _energy(section: Mapping[str, Any]) -> EnergySpec:
    return EnergySpec(
        active_power_w=_opt_float(section["active_power_w"]),
        active_power_w_per_gpu=_opt_float(section["active_power_w_per_gpu"]),
        idle_power_w=_opt_float(section["idle_power_w"]),
        power_limit_w=_opt_float(section["power_limit_w"]),
        power_measurement=str(section["power_measurement"]),
    )


def _calibration(item: Mapping[str, Any]) -> CalibrationPoint:
    return CalibrationPoint(
        model=str(item["model"]),
        model_id=None if item["model_id"] is None else str(item["model_id"]),
        engine=str(item["engine"]),
        quant=str(item["quant"]),
        condition=str(item["condition"]),
        batch_size=_opt_float(item["batch_size"]),
        context_len=_opt_int(item["context_len"]),
        decode_tok_s=float(item["decode_tok_s"]),
        prefill_tok_s=_opt_float(item["prefill_tok_s"]),
        itl_ms=_opt_float(item["itl_ms"]),
        power_w=_opt_float(item["power_w"]),
        energy_per_token_j=_opt_float(item["energy_per_token_j"]),
        source=str(item["source"]),
    )


def build_profile(document: Mapping[str, Any], source_file: str | None = None) -> DeviceProfile:
    """Turn a validated, default-filled profile document into a :class:`DeviceProfile`.

    Args:
        document: The output of schema validation and ``fill_defaults``.
        source_file: Where the document came from, if from a file.
    """
    return DeviceProfile(
        id=str(document["id"]),
        name=str(document["name"]),
        vendor=str(document["vendor"]),
        role=cast(DeviceRole, document["role"]),
        hardware=str(document["hardware"]),
        compute=_compute(document["compute"]),
        memory=_memory(document["memory"]),
        network=_network(document["network"]),
        availability=build_availability(document["availability"]),
        energy=_energy(document["energy"]),
        cost=CostSpec(usd_per_hour=_opt_float(document["cost"]["usd_per_hour"])),
        sources=tuple((str(k), str(v)) for k, v in document["sources"].items()),
        notes=str(document["notes"]),
        calibration=tuple(_calibration(item) for item in document["calibration"]),
        source_file=source_file,
    )
