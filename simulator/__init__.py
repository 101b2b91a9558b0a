"""specdec-sim: a trace-driven discrete-event simulator of LLM serving with speculative decoding.

Typical use::

    from simulator import load_scenario, run
    result = run(load_scenario("scenarios/examples/none_baseline.yaml"))
    result.summary["latency_ms"]["ttft"]["p99"]

The public names are imported on first use, so importing a submodule (for
example :mod:`simulator.errors`) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator._version import __version__
from simulator.lazy_exports import lazy_getattr

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


__getattr__ = lazy_getattr("simulator", _EXPORTS)
