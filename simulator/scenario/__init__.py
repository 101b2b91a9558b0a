"""Scenario files: schema, loading pipeline and the frozen objects they become."""

from __future__ import annotations

from simulator.scenario.load import load_scenario
from simulator.scenario.model import (
    DeviceClass,
    LaneSpec,
    Link,
    ModelSpec,
    NetworkSpec,
    PolicyChoice,
    Scenario,
    SpeculationSpec,
)
from simulator.scenario.schema import scenario_schema

__all__ = [
    "DeviceClass",
    "LaneSpec",
    "Link",
    "ModelSpec",
    "NetworkSpec",
    "PolicyChoice",
    "Scenario",
    "SpeculationSpec",
    "load_scenario",
    "scenario_schema",
]
