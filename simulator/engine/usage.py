"""What each device class did in a run: busy time, energy and the data behind them.

The metrics layer turns these figures into energy and cost per device class
(``summary.json`` ``energy.by_device_class`` and ``cost.by_device_class``).
Whether a class's busy energy is known is decided from its LUT rows: the LUT
schema requires ``energy_mj`` (a number >= 0, never empty or NaN), so a LUT
without an energy model writes 0 in every row and
:meth:`~simulator.lut.LutManager.has_energy` is false for its keys.

Idle energy and hourly price are paid for the time a class's units held
their hardware (``ClassUsage.held``, summed in ``held_unit_s``): all its units
for the run's length, unless a planner changed the replicas of a target pool
during the run. Then every replica of the pool (the scenario's and those the
planner started) counts for the seconds it held its GPUs: from the run's
start, or the moment the planner started it (loading included), until it
retired after draining or the run ended
(:meth:`~simulator.engine.fleet.Fleet.held_s_by_pool`). A replica of
another tensor-parallel degree than the scenario's counts its held and busy
seconds times its GPUs over the scenario replica's, so the class's price
and idle power per replica are paid per GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from simulator.engine.runtime import ClassInfo
from simulator.lut import LutManager


class _Unit(Protocol):
    """A replica or draft device: its class id, busy time, energy and GPUs (0 for a device)."""

    pool: str
    busy_s: float
    energy_j: float
    gpus: int


@dataclass(frozen=True)
class ClassUsage:
    """Work of one device class (``hardware_profiles`` entry) over a run.

    Attributes:
        id: The class id in the scenario.
        type: ``target`` (replica pool) or ``draft`` (client devices).
        units: Replicas or devices in the class (the scenario's count: at the
            start of the run).
        gpus: GPUs of all its units (targets; 0 for draft devices).
        busy_s: Busy seconds summed over its units (a planner's replicas included).
        held: How long its units held their hardware, as ``(units, seconds)``
            groups: ``((units, run length),)``, or for a target pool a planner
            resized, ``(1, seconds)`` for each of its replicas (see the module
            docstring). Idle energy and hourly price are paid for this time.
        busy_energy_j: Energy of its work as the LUT gives it (0 where the
            LUT has no energy; see ``lut_energy``).
        lut_energy: Whether every LUT key the class used (or would use) has
            energy data; true for a class that runs no model.
        idle_power_w: Idle power of one unit from its profile, if known.
        active_power_w: Power of one unit while working, from its profile, if known.
        usd_per_hour: Price of one unit per hour (scenario or profile), if known.
    """

    id: str
    type: str
    units: int
    gpus: int
    busy_s: float
    held: tuple[tuple[int, float], ...]
    busy_energy_j: float
    lut_energy: bool
    idle_power_w: float | None
    active_power_w: float | None
    usd_per_hour: float | None

    @property
    def held_unit_s(self) -> float:
        """Unit-seconds its units held their hardware (``units`` x run length without a planner)."""
        return sum(units * seconds for units, seconds in self.held)


def class_usage(
    classes: Iterable[ClassInfo],
    luts: LutManager,
    units: Iterable[_Unit],
    run_s: float,
    held_s: Mapping[str, Sequence[float]],
) -> tuple[ClassUsage, ...]:
    """Return the usage of every device class, in scenario order.

    Args:
        classes: The run's device classes (see :func:`~simulator.engine.runtime.build_runtime`).
        luts: The LUT manager (which keys carry energy data).
        units: Every replica and every draft device the run created (a draft
            device is created when its first request arrives).
        run_s: Length of the run (or what-if window).
        held_s: By class id, the seconds each of its units held its hardware,
            for the classes whose units changed during the run (a planner's
            target pools); every other class held its ``units`` for ``run_s``.
    """
    by_class: dict[str, list[_Unit]] = {}
    for unit in units:
        by_class.setdefault(unit.pool, []).append(unit)
    out: list[ClassUsage] = []
    for cls in classes:
        done = by_class.get(cls.id, [])
        out.append(
            ClassUsage(
                id=cls.id,
                type=cls.type,
                units=cls.units,
                gpus=cls.gpus,
                busy_s=sum(u.busy_s * _unit_share(u, cls) for u in done),
                held=tuple((1, s) for s in held_s[cls.id])
                if cls.id in held_s
                else ((cls.units, run_s),),
                busy_energy_j=sum(u.energy_j for u in done),
                lut_energy=all(luts.has_energy(key) for key in cls.lut_keys),
                idle_power_w=cls.idle_power_w,
                active_power_w=cls.active_power_w,
                usd_per_hour=cls.usd_per_hour,
            )
        )
    return tuple(out)


def _unit_share(unit: _Unit, cls: ClassInfo) -> float:
    """How many of the class's scenario units ``unit`` counts as: its GPUs over theirs.

    1 for draft devices and the scenario's replicas; a planner's replica of
    another tensor-parallel degree counts by its GPUs (see ``held``).
    """
    gpus = unit.gpus
    if cls.type != "target" or not gpus or not cls.gpus or not cls.units:
        return 1.0
    return float(gpus) * cls.units / cls.gpus
