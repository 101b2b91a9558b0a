"""``scheduler.kv.prefix_cache``: the target replicas' prefix caches."""

from __future__ import annotations

from simulator.scenario.model import LanesSpec, PrefixCacheSpec
from simulator.scenario.sections.context import BuildContext
from simulator.workload.spec import SyntheticSource, TraceSource, WorkloadSpec

KEY = "scheduler.kv.prefix_cache"

PREFIX_ROUTERS = frozenset({"cache_aware"})
"""Built-in routers that read the replicas' prefix caches (``reads_prefix``)."""


def build_prefix_cache(ctx: BuildContext, lanes: LanesSpec) -> PrefixCacheSpec | None:
    """The prefix cache settings when enabled (``None``: off), refusing what it cannot run with.

    The cache needs prefill passes priced by the whole-round rules
    (``prefill_first``, ``chunked_prefill``), and a run without the online
    planner (its what-if windows start from a state that holds no cache).
    """
    raw = ctx.doc["scheduler"]["kv"]["prefix_cache"]
    if not raw["enabled"]:
        ctx.refuse_non_defaults(KEY, ("block_tokens",), "the prefix cache is not enabled")
        router = ctx.doc["scheduler"]["routing"]["policy"]
        if router in PREFIX_ROUTERS:
            ctx.issue(
                "scheduler.routing.policy",
                router,
                f"a router that does not read prefix caches, or {KEY}.enabled true",
                "cache-aware routing without a prefix cache",
            )
        return None
    refused = False
    if lanes.split_rounds:
        rule = ctx.doc["scheduler"]["arbitration"]["policy"]
        ctx.issue(
            "scheduler.arbitration.policy",
            rule,
            f"prefill_first or chunked_prefill while {KEY}.enabled is true (lane rules "
            "price their prefill passes without it)",
            "prefix cache with a lane rule",
        )
        refused = True
    if ctx.doc["planner"]["enabled"]:
        ctx.issue(
            "planner.enabled",
            True,
            f"false while {KEY}.enabled is true (what-if windows start without the "
            "replicas' caches)",
            "prefix cache with the online planner",
        )
        refused = True
    if refused:
        return None
    return PrefixCacheSpec(block_tokens=int(raw["block_tokens"]))


MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per block of the Mooncake traces' ``hash_ids`` (``FAST25-release/README.md`` of kvcache-ai/Mooncake: "The block size is 512 tokens")."""


def check_prefix_workload(
    ctx: BuildContext, cache: PrefixCacheSpec | None, workload: WorkloadSpec | None
) -> None:
    """Refuse a prefix cache that no request could hit, or blocks the trace's ids do not name."""
    if cache is None or workload is None:
        return
    source = workload.source
    if isinstance(source, SyntheticSource) and (
        source.shared_prefix is not None or source.sessions is not None
    ):
        return
    table = source.trace if isinstance(source, TraceSource) else None
    if table is None or table.hash_ids is None or workload.prompt_length_override is not None:
        ctx.issue(
            f"{KEY}.enabled",
            True,
            "false, a trace workload whose hash_ids column gives prompt block ids "
            "(docs/workload.md, Prompt block ids) and whose prompt lengths are kept, or a "
            "synthetic workload with a shared_prefix or sessions",
            "prefix cache without prompt block ids",
        )
        return
    if table.format == "mooncake" and cache.block_tokens != MOONCAKE_BLOCK_TOKENS:
        ctx.issue(
            f"{KEY}.block_tokens",
            cache.block_tokens,
            f"{MOONCAKE_BLOCK_TOKENS} with a mooncake trace (its hash_ids name "
            f"{MOONCAKE_BLOCK_TOKENS}-token blocks)",
            "block size other than the trace's",
        )
