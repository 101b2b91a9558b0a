"""Energy and cost of a run, per device class, never with unknowns folded in as 0.

Every device class of the scenario (target pools and draft/client classes)
gets an entry in ``energy.by_device_class`` and ``cost.by_device_class`` of
``summary.json``:

- **busy energy** is the LUT energy of the class's iterations when every
  LUT key the class uses has energy data (some ``energy_mj`` > 0; a LUT
  without an energy model writes 0 in every row), or when the class runs no
  model (``busy_source: lut``). Where the LUT has none but the profile gives
  ``energy.active_power_w``, it is that power times the busy seconds
  (``busy_source: active_power``). Otherwise ``busy_j`` is ``null`` and
  ``measured`` is false.
- **idle energy** is ``energy.idle_power_w`` of the profile times the idle
  seconds of all units: the unit-seconds they held their hardware
  (``ClassUsage.held_unit_s``) minus their busy seconds; ``null`` when the
  profile has no idle power. Held unit-seconds are units × run length, except
  for a target pool a planner resized: each of its replicas counts from the
  run's start, or when the planner started it, until it retired or the run
  ended (loading, serving and draining all hold its GPUs).
- ``total_j`` of a class is its busy energy plus its idle energy where that
  is known (``idle_measured`` says whether it is); ``null`` when the busy
  energy is not measured.
- **cost**: a class with a price per hour (scenario ``usd_per_hour`` or the
  profile's) costs that price × the hours each of its units held its
  hardware (``ClassUsage.held``: units × run hours without a planner, the
  same held time as its idle energy); a draft class also pays its measured
  energy at ``metrics.electricity_usd_per_kwh``. A class with neither has
  ``usd: null`` and ``priced: false``.

Totals sum the classes that are known and name them: ``covers`` lists the
classes included, ``not_measured``/``not_priced`` the ones left out, and
``idle_not_measured`` the classes whose idle energy is missing from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simulator.engine.usage import ClassUsage

J_PER_KWH = 3.6e6
S_PER_HOUR = 3600.0

NO_LUT_ENERGY = (
    "busy energy: energy_mj is 0 in every LUT row the class uses and the profile has no "
    "energy.active_power_w"
)
NO_IDLE_POWER = "idle energy: the profile has no energy.idle_power_w"
NO_HOURLY_PRICE = (
    "usd_per_hour (scenario hardware_profiles[].usd_per_hour or profile cost.usd_per_hour)"
)


def class_energy(usage: ClassUsage) -> dict[str, Any]:
    """Energy entry of one device class (see the module docstring)."""
    busy_j: float | None = None
    source = None
    if usage.lut_energy:
        busy_j, source = usage.busy_energy_j, "lut"
    elif usage.active_power_w is not None:
        busy_j, source = usage.active_power_w * usage.busy_s, "active_power"
    idle_s = max(0.0, usage.held_unit_s - usage.busy_s)
    idle_j = usage.idle_power_w * idle_s if usage.idle_power_w is not None else None
    missing = [
        text
        for text, absent in ((NO_LUT_ENERGY, busy_j is None), (NO_IDLE_POWER, idle_j is None))
        if absent
    ]
    total_j = None if busy_j is None else busy_j + (idle_j if idle_j is not None else 0.0)
    return {
        "type": usage.type,
        "units": usage.units,
        "busy_s": usage.busy_s,
        "busy_j": busy_j,
        "busy_source": source,
        "idle_j": idle_j,
        "total_j": total_j,
        "measured": busy_j is not None,
        "idle_measured": idle_j is not None,
        "missing": "; ".join(missing) if missing else None,
    }


def energy_section(classes: Sequence[ClassUsage], out_tokens: int, record: bool) -> dict[str, Any]:
    """The ``energy`` section of the summary."""
    if not record:
        return {
            "total_j": None,
            "j_per_output_token": None,
            "covers": [],
            "not_measured": [],
            "idle_not_measured": [],
            "by_device_class": {},
        }
    by_class = {u.id: class_energy(u) for u in classes}
    covers = [name for name, entry in by_class.items() if entry["measured"]]
    total = sum(by_class[name]["total_j"] for name in covers) if covers else None
    return {
        "total_j": total,
        "j_per_output_token": total / out_tokens if total is not None and out_tokens else None,
        "covers": covers,
        "not_measured": [name for name in by_class if name not in covers],
        "idle_not_measured": [n for n, e in by_class.items() if not e["idle_measured"]],
        "by_device_class": by_class,
    }


def class_cost(
    usage: ClassUsage,
    energy: dict[str, Any] | None,
    electricity_usd_per_kwh: float | None,
) -> dict[str, Any]:
    """Cost entry of one device class (see the module docstring)."""
    price = usage.usd_per_hour
    # units x price x seconds per group (one group, the whole run, without a planner)
    hourly = (
        sum(units * price * seconds for units, seconds in usage.held) / S_PER_HOUR
        if price is not None
        else None
    )
    electricity = None
    missing = [] if hourly is not None else [NO_HOURLY_PRICE]
    if usage.type == "draft":
        total_j = energy["total_j"] if energy is not None else None
        if total_j is not None and electricity_usd_per_kwh is not None:
            electricity = total_j / J_PER_KWH * electricity_usd_per_kwh
        else:
            missing.append(
                "electricity: energy not measured"
                if electricity_usd_per_kwh is not None
                else "electricity: metrics.electricity_usd_per_kwh is null"
            )
    parts = [part for part in (hourly, electricity) if part is not None]
    return {
        "type": usage.type,
        "usd": sum(parts) if parts else None,
        "usd_hourly": hourly,
        "usd_electricity": electricity,
        "usd_per_hour": usage.usd_per_hour,
        "priced": bool(parts),
        "missing": "; ".join(missing) if missing else None,
    }


def cost_section(
    classes: Sequence[ClassUsage],
    energy: dict[str, Any],
    out_tokens: int,
    electricity_usd_per_kwh: float | None,
    record: bool,
) -> dict[str, Any]:
    """The ``cost`` section of the summary (``energy`` is the summary's energy section)."""
    if not record:
        return {
            "usd_total": None,
            "usd_per_1k_tokens": None,
            "electricity_usd_per_kwh": electricity_usd_per_kwh,
            "covers": [],
            "not_priced": [],
            "by_device_class": {},
        }
    energies = energy["by_device_class"]
    by_class = {u.id: class_cost(u, energies.get(u.id), electricity_usd_per_kwh) for u in classes}
    covers = [name for name, entry in by_class.items() if entry["priced"]]
    total = sum(by_class[name]["usd"] for name in covers) if covers else None
    return {
        "usd_total": total,
        "usd_per_1k_tokens": total / out_tokens * 1000.0
        if total is not None and out_tokens
        else None,
        "electricity_usd_per_kwh": electricity_usd_per_kwh,
        "covers": covers,
        "not_priced": [name for name in by_class if name not in covers],
        "by_device_class": by_class,
    }
