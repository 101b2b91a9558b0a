"""The ``prefix_cache`` section of ``summary.json`` (runs with ``scheduler.kv.prefix_cache``)."""

from __future__ import annotations

from typing import Any

from simulator.engine.prefix_cache import PrefixCacheOutput, PrefixCacheStats


def _figures(stats: PrefixCacheStats) -> dict[str, Any]:
    return {
        "prefills": stats.lookups,
        "blocks_queried": stats.blocks_queried,
        "blocks_hit": stats.blocks_hit,
        "block_hit_rate": stats.block_hit_rate,
        "prompt_tokens": stats.prompt_tokens,
        "tokens_hit": stats.tokens_hit,
        "token_hit_rate": stats.token_hit_rate,
        "prefill_tokens_saved": stats.tokens_hit,
        "blocks_evicted": stats.blocks_evicted,
    }


def prefix_cache_summary(output: PrefixCacheOutput) -> dict[str, Any]:
    """Hit rates and prefill tokens saved, over the whole run and per target replica.

    Counts cover every prefill of the run (warm-up included; a recomputed
    prefill counts again): ``block_hit_rate`` is blocks found cached over the
    full prompt blocks a lookup could find, ``token_hit_rate`` prompt tokens
    found cached over prompt tokens prefilled, and ``prefill_tokens_saved``
    the tokens found cached (not computed again).
    """
    total = PrefixCacheStats(*(sum(getattr(s, name) for s in output.replicas) for name in _FIELDS))
    return {
        **_figures(total),
        "by_replica": [_figures(stats) for stats in output.replicas],
    }


_FIELDS = (
    "lookups",
    "blocks_queried",
    "blocks_hit",
    "prompt_tokens",
    "tokens_hit",
    "blocks_evicted",
)
