"""``scheduler.routing.decode``: the routing policy choosing a prefilled request's decode replica.

In a disaggregated fleet routing chooses two replicas per request:
``scheduler.routing`` the prefill replica a new request goes to, and
``scheduler.routing.decode`` the decode replica its KV moves to once it is
prefilled, among the decode replicas that can reserve its KV then (see
:mod:`simulator.engine.kv_transfer`). Both are policies of the routing
family. A router that ranks by the KV transfer (``reads_kv_transfer``) only
makes sense for the second; one that reads prefix caches only for the first
(decode replicas keep none). In a colocated fleet the decode key is refused
unless left at its default.
"""

from __future__ import annotations

from typing import Any

from policies.plugins import PolicyImportError, policy_class
from simulator.scenario.model import DeviceClass, PolicyChoice
from simulator.scenario.sections.context import BuildContext
from simulator.scenario.sections.policy_choice import build_policy

KEY = "scheduler.routing.decode"


def _router(ctx: BuildContext, choice: PolicyChoice) -> type[Any] | None:
    """The chosen router's class (``None`` when it could not be built: already reported)."""
    if choice.params is None:
        return None
    try:
        return policy_class("routing", choice.name, ctx.consent)
    except PolicyImportError:
        return None


def build_decode_routing(
    ctx: BuildContext, classes: list[DeviceClass], first: PolicyChoice
) -> PolicyChoice | None:
    """The decode-replica router of a disaggregated fleet (``None``: the fleet is colocated).

    ``first`` is the already built ``scheduler.routing`` choice, refused here
    when it ranks by KV transfers.
    """
    first_cls = _router(ctx, first)
    if first_cls is not None and first_cls.reads_kv_transfer:
        ctx.issue(
            "scheduler.routing.policy",
            first.name,
            f"a router of new requests (one that ranks by the KV transfer is for {KEY}.policy)",
            "KV-transfer router choosing prefill replicas, before any KV exists to move",
        )
    if not any(d.type == "target" and d.role != "colocated" for d in classes):
        ctx.refuse_non_defaults(
            KEY, (), "only a disaggregated fleet hands requests to decode replicas"
        )
        return None
    raw = ctx.doc["scheduler"]["routing"]["decode"]
    choice = build_policy(ctx, "routing", raw["policy"], raw["params"], KEY)
    cls = _router(ctx, choice)
    if cls is not None and cls.reads_prefix:
        ctx.issue(
            f"{KEY}.policy",
            choice.name,
            "a router that does not read prefix caches",
            "decode replicas keep no prefix cache to route by",
        )
    return choice
