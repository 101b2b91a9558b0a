"""Sweeps: run a scenario at many points (grid or list), locally or on Ray, and tabulate them.

The public names are imported on first use, so loading a sweep or plan-space
file (:mod:`simulator.sweeps.spec`, :mod:`simulator.sweeps.plan_space`, as
``validate`` does) does not import the runner and the output writers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.lazy_exports import lazy_getattr

_EXPORTS = {
    "sweep": "simulator.sweeps.run",
    "CapacityResult": "simulator.sweeps.search",
    "capacity": "simulator.sweeps.search",
    "Sweep": "simulator.sweeps.spec",
    "SweepPoint": "simulator.sweeps.spec",
    "load_sweep": "simulator.sweeps.spec",
}

__all__ = ["CapacityResult", "Sweep", "SweepPoint", "capacity", "load_sweep", "sweep"]

if TYPE_CHECKING:
    from simulator.sweeps.run import sweep
    from simulator.sweeps.search import CapacityResult, capacity
    from simulator.sweeps.spec import Sweep, SweepPoint, load_sweep


__getattr__ = lazy_getattr("simulator.sweeps", _EXPORTS)
