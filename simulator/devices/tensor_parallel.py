"""Tensor-parallel degrees of a target pool: the device profiles that serve them.

A pool's replica may run at another tensor-parallel degree when a target
profile of the same hardware at that degree lies in the folder of the
pool's profile (the shipped A100 profiles: ``a100-tp1.yaml``,
``a100-tp4.yaml``). Whether the pool's models have LUT rows at the degree
is for the caller to check. The offline placement search
(:mod:`simulator.sweeps.plan_space`) and the online planner's
``tensor_parallel`` candidates (:mod:`simulator.scenario.sections.tensor_parallel`)
both resolve degrees here and refuse the others with :func:`unusable_degrees_issue`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from simulator.devices.load import load_device_profile
from simulator.devices.model import DeviceProfile
from simulator.errors import InputError, Issue, make_issue


def tensor_parallel_profiles(
    profile_path: Path, hardware: str
) -> dict[int, tuple[Path, DeviceProfile]]:
    """Tensor-parallel degree -> (path, profile) of the target profiles of ``hardware``.

    The candidates are the profiles in the folder of ``profile_path`` (a
    pool's profile), first file by name per degree; files that do not load
    as device profiles are skipped.
    """
    found: dict[int, tuple[Path, DeviceProfile]] = {}
    for path in sorted(profile_path.parent.glob("*.yaml")):
        try:
            profile = load_device_profile(path)
        except InputError:
            continue
        if profile.role == "target" and profile.hardware == hardware:
            found.setdefault(profile.compute.tensor_parallel, (path, profile))
    return found


def unusable_degrees_issue(
    file: Path, key: str, bad: Sequence[int] | int, usable: Mapping[int, Path | str]
) -> Issue:
    """The issue refusing degrees ``bad`` at ``key``, listing the usable ones with their profiles."""
    allowed = ", ".join(f"{d} ({Path(usable[d]).name})" for d in sorted(usable)) or "none"
    return make_issue(
        file,
        key,
        bad,
        f"degrees with a device profile of this pool's hardware and LUT rows for its model: {allowed}",
        "no usable device profile and LUT at this tensor-parallel degree",
    )
