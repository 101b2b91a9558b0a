"""``planner.candidates.tensor_parallel``: the device classes a pool's replicas take at each degree.

For every target pool and every listed degree, the pool's class as it
would be with the profile of that degree (see
:mod:`simulator.devices.tensor_parallel`): same id, models, engine and
availability, the other profile's compute, memory and parallelism. A
degree is usable for a pool when such a profile exists and the pool's
models have LUT rows at it (the check the pool's own profile passes); a
degree some pool cannot use is refused, naming the usable ones. The
target pools must start at one degree (a candidate sets every pool's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from simulator.devices.tensor_parallel import tensor_parallel_profiles, unusable_degrees_issue
from simulator.scenario.model import DeviceClass
from simulator.scenario.sections.context import BuildContext

KEY = "planner.candidates.tensor_parallel"


def build_tensor_parallel_classes(
    ctx: BuildContext, classes: list[DeviceClass], covered: Callable[[DeviceClass], bool]
) -> dict[tuple[str, int], DeviceClass]:
    """``(pool, degree)`` -> the pool's class at that degree, for every listed degree.

    ``covered`` tells whether a class finds every LUT row it needs. Empty
    without a planner or without ``tensor_parallel`` candidates.
    """
    planner = ctx.doc["planner"]
    candidates = planner["candidates"]
    degrees = [int(d) for d in candidates.get("tensor_parallel", ())]
    if not planner["enabled"] or not degrees:
        return {}
    if "draft_replicas" in candidates:
        ctx.issue(
            KEY,
            candidates["tensor_parallel"],
            "the key left out with planner.candidates.draft_replicas (a draft/verify split "
            "keeps the pool's tensor-parallel degree)",
            "tensor-parallel candidates with draft replicas",
        )
        return {}
    targets = [device for device in classes if device.type == "target"]
    if len({device.tensor_parallel for device in targets}) > 1:
        ctx.issue(
            KEY,
            candidates["tensor_parallel"],
            "the key left out unless every target pool starts at the same degree (a candidate "
            "gives every pool its degree; the run's own configuration must be one of them): "
            + ", ".join(f"{d.id} at {d.tensor_parallel}" for d in targets),
            "target pools at different tensor-parallel degrees",
        )
        return {}
    out: dict[tuple[str, int], DeviceClass] = {}
    for device in targets:
        usable = _usable(device, covered)
        for index, degree in enumerate(degrees):
            if degree in usable:
                out[(device.id, degree)] = usable[degree]
            else:
                paths = {d: c.profile_path for d, c in usable.items()}
                ctx.issues.append(
                    unusable_degrees_issue(ctx.file, f"{KEY}[{index}]", degree, paths)
                )
    return out


def _usable(device: DeviceClass, covered: Callable[[DeviceClass], bool]) -> dict[int, DeviceClass]:
    """The pool's class at each degree it can run (its own profile's degree: itself)."""
    usable: dict[int, DeviceClass] = {device.tensor_parallel: device}
    for degree, (path, profile) in tensor_parallel_profiles(
        device.profile_path, device.hardware
    ).items():
        if degree in usable:
            continue
        other = replace(
            device,
            profile=profile,
            profile_path=path,
            tensor_parallel=profile.compute.tensor_parallel,
            pipeline_parallel=profile.compute.pipeline_parallel,
        )
        if covered(other):
            usable[degree] = other
    return usable
