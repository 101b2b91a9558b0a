"""``hardware_profiles[].role``: disaggregated prefill and decode pools.

A target class is ``colocated`` (the default: its replicas prefill and
decode), ``prefill`` or ``decode``. A disaggregated fleet has at least one
prefill and one decode class, no colocated class, every target class
serving the same models (a request's KV must be usable on the replica it
moves to), every prefill class linked to a decode class (the link carries
the KV), and every client class linked to a prefill class linked to a
decode class the client is linked to as well (its prompt goes to a prefill
replica, its tokens come from a decode replica, and in modes distributed and
hybrid its drafts go to a decode replica). Every speculation mode runs, on the
decode replicas (:mod:`simulator.engine.disaggregation`), under either
``scheduler.kv.on_full`` rule (see :mod:`simulator.engine.kv_transfer` for
what each reserves where); no prefix cache and no lane arbitration rule; a
planner sizes the pools by role only
(:mod:`~simulator.scenario.sections.disaggregated_planner`).
"""

from __future__ import annotations

from collections.abc import Mapping

from simulator.scenario.model import DeviceClass, NetworkSpec
from simulator.scenario.sections.context import BuildContext

COLOCATED = "colocated"
PREFILL = "prefill"
DECODE = "decode"


def check_disaggregation(
    ctx: BuildContext, classes: list[DeviceClass], network: NetworkSpec
) -> None:
    """Refuse roles on clients and every disaggregated fleet this version cannot run."""
    doc = ctx.doc
    entries = doc["hardware_profiles"]
    for index, entry in enumerate(entries):
        if entry["type"] == "draft" and entry["role"] != COLOCATED:
            ctx.issue(
                f"hardware_profiles[{index}].role",
                entry["role"],
                "colocated (the default): client devices neither prefill nor decode for others",
                "role on a client device class",
            )
    targets = [d for d in classes if d.type == "target"]
    prefill = [d for d in targets if d.role == PREFILL]
    decode = [d for d in targets if d.role == DECODE]
    if not prefill and not decode:
        return
    roles = {d.id: d.role for d in targets}
    if not prefill or not decode:
        missing = PREFILL if not prefill else DECODE
        ctx.issue(
            "hardware_profiles",
            roles,
            f"at least one target class of role {missing} beside the "
            f"{DECODE if not prefill else PREFILL} ones",
            f"a disaggregated fleet without a {missing} pool",
        )
    for index, entry in enumerate(entries):
        if entry["type"] == "target" and entry["role"] == COLOCATED:
            ctx.issue(
                f"hardware_profiles[{index}].role",
                entry["role"],
                "prefill or decode: a disaggregated fleet has no colocated pool",
                "colocated pool beside prefill and decode pools",
            )
    first = targets[0]
    for index, entry in enumerate(entries):
        device = next((d for d in targets if d.id == entry["id"]), None)
        if device is None or device is first:
            continue
        if (device.model, device.fused_model) != (first.model, first.fused_model):
            ctx.issue(
                f"hardware_profiles[{index}].model",
                device.model or device.fused_model,
                f"the model of {first.id}: {first.model or first.fused_model} (the KV a "
                "prefill replica makes must be usable on the decode replica)",
                "target classes of a disaggregated fleet serve different models",
            )
    for index, entry in enumerate(entries):
        linked = any(network.link_between(entry["id"], d.id) for d in decode)
        if entry["type"] == "target" and entry["role"] == PREFILL and not linked:
            ctx.issue(
                f"hardware_profiles[{index}].id",
                entry["id"],
                "a network.links entry joining it to a decode class: "
                + ", ".join(d.id for d in decode),
                "prefill class with no link to any decode class (its KV could not move)",
            )
    _check_clients(ctx, entries, prefill, decode, network)
    if doc["scheduler"]["kv"]["prefix_cache"]["enabled"]:
        ctx.issue(
            "scheduler.kv.prefix_cache.enabled",
            True,
            "false with prefill and decode pools",
            "a prefix cache on prefill replicas whose KV moves away is not modelled",
        )
    if ctx.splits_rounds():
        ctx.issue(
            "scheduler.arbitration.policy",
            doc["scheduler"]["arbitration"]["policy"],
            "a rule that runs whole rounds with prefill and decode pools",
            "lane rules split rounds on colocated replicas only",
        )


def _check_clients(
    ctx: BuildContext,
    entries: list[Mapping[str, object]],
    prefill: list[DeviceClass],
    decode: list[DeviceClass],
    network: NetworkSpec,
) -> None:
    """Refuse a client class that cannot reach both a prefill pool and a decode pool linked to it."""
    for index, entry in enumerate(entries):
        client = entry["id"]
        if entry["type"] != "draft" or not network.links:
            continue
        assert isinstance(client, str)
        ok = any(
            network.link_between(client, p.id)
            and network.link_between(p.id, d.id)
            and network.link_between(client, d.id)
            for p in prefill
            for d in decode
        )
        if not ok:
            ctx.issue(
                f"hardware_profiles[{index}].id",
                client,
                "network.links entries joining it to a prefill class and to a decode class "
                "linked to that prefill class",
                "client device class cannot reach a prefill pool and a decode pool",
            )
