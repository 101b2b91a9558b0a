"""specdec-sim: a trace-driven discrete-event simulator of LLM serving with speculative decoding.

Typical use::

    from simulator import load_scenario, run
    result = run(load_scenario("scenarios/examples/none_baseline.yaml"))
    result.summary["latency_ms"]["ttft"]["p99"]

The public names are imported on first use, so importing a submodule (for
example :mod:`simulator.errors`) stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from simulator._version import __version__

_EXPORTS = {
    "InputError": "simulator.errors",
    "Issue": "simulator.errors",
    "Result": "simulator.runner",
    "run": "simulator.runner",
    "Scenario": "simulator.scenario",
    "load_scenario": "simulator.scenario",
    "sweep": "simulator.sweeps",
    "capacity": "simulator.sweeps",
}

__all__ = [
    "InputError",
    "Issue",
    "Result",
    "Scenario",
    "__version__",
    "capacity",
    "load_scenario",
    "run",
    "sweep",
]

if TYPE_CHECKING:
    from simulator.errors import InputError, Issue
    from simulator.runner import Result, run
    from simulator.scenario import Scenario, load_scenario
    from simulator.sweeps import capacity, sweep


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    return getattr(import_module(module), name)
