"""Build frozen scenario objects from a schema-valid document: the coordinator of the sections.

Each section of the document is checked and built by its own module under
:mod:`simulator.scenario.sections` (see :mod:`simulator.scenario` for the
map); :func:`build_scenario` runs them in a fixed order over one shared
:class:`~simulator.scenario.sections.context.BuildContext`, so the issues of
a bad scenario are always reported in the same order, all at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from policies.plugins import PluginConsent
from simulator.errors import InputError
from simulator.lut import LutManager, LutTable
from simulator.scenario.model import DeviceClass, LanesSpec, ModelSpec, Scenario, TreeSpec
from simulator.scenario.reach import lut_reach_issues
from simulator.scenario.requests import checked_requests
from simulator.scenario.sections.acceptance_use import check_acceptance_use
from simulator.scenario.sections.chunk_budget import check_chunk_budget
from simulator.scenario.sections.context import BuildContext
from simulator.scenario.sections.decode_routing import build_decode_routing
from simulator.scenario.sections.devices import (
    build_device_classes,
    check_engine_layers,
    load_profiles,
)
from simulator.scenario.sections.disaggregated_planner import check_disaggregated_planner
from simulator.scenario.sections.disaggregation import check_disaggregation
from simulator.scenario.sections.lanes import build_lanes
from simulator.scenario.sections.models import (
    build_models,
    check_lut_coverage,
    load_acceptance,
    lut_covers,
)
from simulator.scenario.sections.network import build_network, check_client_links
from simulator.scenario.sections.planner import build_planner
from simulator.scenario.sections.prefix_cache import build_prefix_cache, check_prefix_workload
from simulator.scenario.sections.run_settings import (
    build_metadata,
    build_metrics,
    build_simulation,
    build_workload,
)
from simulator.scenario.sections.scheduler import build_scheduler, check_kv_guard
from simulator.scenario.sections.speculation import build_speculation
from simulator.scenario.sections.tensor_parallel import build_tensor_parallel_classes
from simulator.scenario.sections.tree import build_tree


def build_scenario(
    document: Mapping[str, Any],
    file: Path,
    resolved: Mapping[str, Any] | None = None,
    consent: PluginConsent | None = None,
) -> Scenario:
    """Build a :class:`Scenario` from a schema-valid, default-filled document.

    ``resolved`` is the document to record as the scenario's resolved form
    (default: ``document``). ``consent`` names the modules an import-path
    policy may come from (default: those the environment variable
    ``SPECDEC_ALLOW_PLUGINS`` names); no other module is imported.

    With ``simulation.lut_out_of_range: raise``, the LUT lookups the run
    will make for the workload's requests are checked against the grids too
    (see :mod:`simulator.scenario.reach`), once everything else is valid;
    the request table built for that is kept as :attr:`Scenario.requests`,
    for the run to replay.

    Raises:
        InputError: With every cross-field and referenced-file problem.
    """
    ctx = BuildContext(document, file, consent or PluginConsent.from_environment())
    profiles = load_profiles(ctx)
    device_ids = {e["id"]: e["type"] for e in document["hardware_profiles"]}
    network = build_network(ctx, device_ids)
    curves = load_acceptance(ctx)
    luts: dict[Path, LutTable | None] = {}
    models = build_models(ctx, curves, luts)
    classes = build_device_classes(ctx, profiles, models)
    check_kv_guard(ctx, classes)
    check_lut_coverage(ctx, classes, models, luts)
    check_chunk_budget(ctx, classes, models, luts)
    check_client_links(ctx, classes, network)
    check_disaggregation(ctx, classes, network)
    speculation = replace(
        build_speculation(ctx, models, curves), tree=build_tree(ctx, classes, luts)
    )
    lanes = build_lanes(ctx, classes, luts)
    check_engine_layers(ctx, classes, _target_model_ids(classes, models, lanes, speculation.tree))
    scheduler = build_scheduler(ctx, lanes)
    scheduler = replace(
        scheduler,
        prefix_cache=build_prefix_cache(ctx, lanes),
        decode_routing=build_decode_routing(ctx, classes, scheduler.routing),
    )
    planner = build_planner(ctx)
    check_disaggregated_planner(ctx)
    tp_classes = build_tensor_parallel_classes(ctx, classes, partial(lut_covers, ctx, models, luts))
    metrics = build_metrics(ctx)
    workload = build_workload(ctx, [d for d, t in device_ids.items() if t == "draft"])
    check_prefix_workload(ctx, scheduler.prefix_cache, workload)
    check_acceptance_use(ctx, classes, models, speculation, workload)
    manager = LutManager()
    for table in luts.values():
        if table is not None:
            try:
                manager.add(table)
            except InputError as exc:
                ctx.issues.extend(exc.issues)
    if ctx.issues:
        raise InputError(ctx.issues)
    assert workload is not None  # no issues means the workload was built
    scenario = Scenario(
        scenario_id=document["scenario_id"],
        seed=int(document["seed"]),
        source_file=file,
        metadata=build_metadata(ctx),
        workload=workload,
        network=network,
        devices=tuple(classes),
        speculation=speculation,
        scheduler=scheduler,
        planner=planner,
        metrics=metrics,
        simulation=build_simulation(ctx),
        luts=manager,
        resolved_json=json.dumps(resolved if resolved is not None else document),
        tensor_parallel_classes=tp_classes,
    )
    if scenario.simulation.lut_out_of_range == "raise":
        requests = checked_requests(scenario)
        reach = lut_reach_issues(scenario, requests)
        if reach:
            raise InputError(reach)
        scenario = replace(scenario, requests=requests)
    return scenario


def _target_model_ids(
    classes: list[DeviceClass],
    models: Mapping[str, ModelSpec],
    lanes: LanesSpec,
    tree: TreeSpec | None,
) -> dict[str, tuple[str, ...]]:
    """The LUT model ids each target class's replicas run (verifier, fused, lane and tree models)."""
    out: dict[str, tuple[str, ...]] = {}
    for device in classes:
        if device.type != "target":
            continue
        ids = [models[name].model_id for name in (device.model, device.fused_model) if name]
        ids += [lane.model_id for lane in (lanes.drafter, lanes.verifier) if lane is not None]
        if tree is not None and device.fused_model:
            ids += [tree.verifier.model_id, tree.drafter.model_id]
        out[device.id] = tuple(ids)
    return out
