"""Device profiles: client devices that draft and target replicas that verify.

``load_device_profile(path)`` reads and checks one profile file (schema
``simulator/schemas/device_profile.schema.json``, documented in
``device_profiles/README.md``); :class:`DeviceRegistry` holds several and looks
them up by id.
"""

from __future__ import annotations

from simulator.devices.checks import availability_section_issues
from simulator.devices.engine_profile import (
    BUNDLED_ENGINES,
    DEFAULT_ENGINE,
    EngineProfile,
    engine_reference,
    is_engine_path,
    load_engine_profile,
)
from simulator.devices.load import (
    SCHEMA_NAME,
    build_availability,
    build_profile,
    load_device_profile,
    load_device_profiles,
)
from simulator.devices.model import (
    Availability,
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
from simulator.devices.registry import DeviceRegistry, UnknownDeviceError

__all__ = [
    "BUNDLED_ENGINES",
    "DEFAULT_ENGINE",
    "SCHEMA_NAME",
    "Availability",
    "AvailabilityWindow",
    "CalibrationPoint",
    "CollectiveFit",
    "ComputeSpec",
    "CostSpec",
    "DeviceProfile",
    "DeviceRegistry",
    "DeviceRole",
    "EnergySpec",
    "EngineProfile",
    "Interconnect",
    "KvCapacityPoint",
    "LinkLabel",
    "MemorySpec",
    "NetworkSpec",
    "ParallelismLimits",
    "ThermalSpec",
    "UnknownDeviceError",
    "availability_section_issues",
    "build_availability",
    "build_profile",
    "engine_reference",
    "is_engine_path",
    "load_device_profile",
    "load_device_profiles",
    "load_engine_profile",
]
