"""Sweeps: run a scenario at many points (grid or list), locally or on Ray, and tabulate them."""

from __future__ import annotations

from simulator.sweeps.run import sweep
from simulator.sweeps.search import CapacityResult, capacity
from simulator.sweeps.spec import Sweep, SweepPoint, load_sweep

__all__ = ["CapacityResult", "Sweep", "SweepPoint", "capacity", "load_sweep", "sweep"]
