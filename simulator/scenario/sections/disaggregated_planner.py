"""``planner`` with disaggregated pools: the prefill:decode split and what it cannot do yet.

``planner.candidates.prefill_replicas`` and ``decode_replicas`` size every
prefill pool and every decode pool (DistServe's xPyD). They need prefill
and decode pools; a disaggregated fleet's planner sizes its pools with
them only (``verify_replicas`` would give both roles one count,
``draft_replicas`` needs mode hybrid, which such fleets refuse, and a
reload at another tensor-parallel degree is not modelled for them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulator.limits import MAX_TARGET_REPLICAS
from simulator.scenario.sections.context import BuildContext

ROLE_KEYS = {"prefill": "prefill_replicas", "decode": "decode_replicas"}
"""The candidate key sizing the pools of each role."""

_OTHER_SIZES = ("verify_replicas", "draft_replicas", "tensor_parallel")
"""Candidate keys that size or reload pools without regard to their role."""


def _roles(ctx: BuildContext) -> list[str]:
    """The role of every target class, in scenario order."""
    return [str(e["role"]) for e in ctx.doc["hardware_profiles"] if e["type"] == "target"]


def check_disaggregated_planner(ctx: BuildContext) -> None:
    """Refuse split candidates without prefill and decode pools, and what a split planner cannot do."""
    raw = ctx.doc["planner"]
    if not raw["enabled"]:
        return
    _check_role_candidates(ctx, raw["candidates"])
    roles = _roles(ctx)
    if "prefill" in roles and "decode" in roles:
        _check_split_planner(ctx)


def _check_role_candidates(ctx: BuildContext, candidates: Mapping[str, Any]) -> None:
    """Refuse ``prefill_replicas`` / ``decode_replicas`` in a fleet without prefill and decode pools."""
    roles = _roles(ctx)
    for role, key in ROLE_KEYS.items():
        if key in candidates and role not in roles:
            ctx.issue(
                f"planner.candidates.{key}",
                candidates[key],
                f"the key left out unless hardware_profiles has {role} pools (role: {role}) "
                "beside pools of the other role",
                f"no {role} pool to size",
            )


def _check_split_planner(ctx: BuildContext) -> None:
    """Refuse planner settings a disaggregated fleet cannot honour (see the module docstring)."""
    raw = ctx.doc["planner"]
    candidates: Mapping[str, Any] = raw["candidates"]
    for key in _OTHER_SIZES:
        if key in candidates:
            ctx.issue(
                f"planner.candidates.{key}",
                candidates[key],
                "prefill_replicas and decode_replicas with prefill and decode pools (they size "
                "each role's pools)",
                f"{key} does not size or reload disaggregated pools",
            )
    targets = [e for e in ctx.doc["hardware_profiles"] if e["type"] == "target"]
    total = sum(
        max(candidates[ROLE_KEYS[e["role"]]])
        if ROLE_KEYS.get(e["role"], "") in candidates
        else int(e["count"])
        for e in targets
    )
    if total > MAX_TARGET_REPLICAS:
        ctx.issue(
            "planner.candidates",
            {key: candidates[key] for key in ROLE_KEYS.values() if key in candidates},
            f"values giving at most {MAX_TARGET_REPLICAS:,} target replicas in all target "
            "classes together (each pool of a role gets its role's value)",
            f"a candidate with {total:,} target replicas",
        )
