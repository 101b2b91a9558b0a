"""A target replica's prefix cache: KV blocks of prompts kept for later requests.

With ``scheduler.kv.prefix_cache.enabled`` every target replica keeps the KV
of the prompts it prefilled in blocks of ``block_tokens`` tokens, one cache per
model it runs (the verifier's blocks are not the fused model's). A block is
known by the chain of block ids from the prompt's first block to it (a radix
tree over block ids): two prompts share a cached block only when all their
blocks up to it are equal, as with vLLM's automatic prefix caching (each
block's hash covers its prefix) and SGLang's radix cache. Request block ids
come from the trace's ``hash_ids`` (see ``docs/workload.md``).

What a request finds cached (:meth:`PrefixCache.match`): the longest run of
its leading full blocks in the cache, at most ``(prompt_tokens - 1) //
block_tokens`` blocks, so that at least one prompt token is computed to give
the first output token (as vLLM does when every block hits).

Memory (the rule SCENARIO.md states under *Prefix cache*): a cached
block referenced by running requests is held KV (once, however many share
it); a block nobody references is *free-but-cached*: it lives in KV that no
running request holds, and an allocation that needs more room than the
really free KV evicts such blocks, least recently used first (ties: the
deepest block first), always a leaf of the tree, so what stays cached is
still reachable from the first block. A block's last use is when a request
that referenced it released it.

:class:`PrefixCache` only keeps the tree, the references and the counts;
:class:`~simulator.engine.replica_kv.ReplicaKv` moves the KV.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class Block:
    """One cached block of one model's cache (a node of its radix tree)."""

    __slots__ = ("children", "depth", "entry", "key", "last_used_s", "mb", "parent", "refs")

    def __init__(self, key: int, parent: Block | None, depth: int, mb: float) -> None:
        self.key = key
        self.parent = parent
        self.depth = depth
        self.mb = mb
        self.children: dict[int, Block] = {}
        self.refs = 0
        self.last_used_s = 0.0
        self.entry = -1
        """Sequence number of its live entry in the eviction heap (-1: none)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Block:
        """Copy every block linked to this one, without recursion.

        A tree is as deep as a prompt has blocks (a 100,000-token prompt in
        16-token blocks: 6,250), and :func:`copy.deepcopy` would recurse
        several frames per level, past Python's recursion limit, when a
        what-if window copies a stopped run. Blocks reached through
        ``parent`` and ``children`` are copied here, each once (those in
        ``memo`` already are reused).
        """
        found: list[Block] = []
        todo = [self]
        while todo:
            block = todo.pop()
            if id(block) in memo:
                continue
            twin = Block(block.key, None, block.depth, block.mb)
            twin.refs = block.refs
            twin.last_used_s = block.last_used_s
            twin.entry = block.entry
            memo[id(block)] = twin
            found.append(block)
            if block.parent is not None:
                todo.append(block.parent)
            todo.extend(block.children.values())
        for block in found:
            twin = memo[id(block)]
            if block.parent is not None:
                twin.parent = memo[id(block.parent)]
            twin.children = {key: memo[id(child)] for key, child in block.children.items()}
        copied: Block = memo[id(self)]
        return copied


@dataclass(frozen=True)
class PrefixCacheStats:
    """What one replica's prefix cache did over a run.

    Attributes:
        lookups: Prefills that looked the cache up (a recomputed prefill
            looks it up again).
        blocks_queried: Full prompt blocks those prefills could have found
            (at most ``(prompt_tokens - 1) // block_tokens`` each).
        blocks_hit: Blocks they found cached.
        prompt_tokens: Prompt tokens of those prefills.
        tokens_hit: Prompt tokens they found cached (``blocks_hit *
            block_tokens``): prefill tokens saved.
        blocks_evicted: Free-but-cached blocks evicted to make room.
    """

    lookups: int
    blocks_queried: int
    blocks_hit: int
    prompt_tokens: int
    tokens_hit: int
    blocks_evicted: int

    @property
    def block_hit_rate(self) -> float:
        """Blocks hit over blocks queried (0 when none were)."""
        return self.blocks_hit / self.blocks_queried if self.blocks_queried else 0.0

    @property
    def token_hit_rate(self) -> float:
        """Prompt tokens found cached over prompt tokens prefilled (0 when none)."""
        return self.tokens_hit / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True)
class PrefixCacheOutput:
    """What the prefix caches of a run did (in the engine's output when the cache is on).

    Attributes:
        replicas: Each target replica's counts, in replica order.
        cached_tokens: Request id -> prompt tokens its last prefill found
            cached (requests never prefilled are absent).
    """

    replicas: tuple[PrefixCacheStats, ...]
    cached_tokens: Mapping[int, int]


def cache_output(
    caches: Sequence[PrefixCache | None], context: _Recorded
) -> PrefixCacheOutput | None:
    """Each replica's counts and each request's cached tokens, for the run's output (None: off)."""
    if not caches or caches[0] is None:
        return None
    stats = tuple(cache.stats() for cache in caches if cache is not None)
    return PrefixCacheOutput(stats, dict(context.prefix_cached))


class _Recorded(Protocol):
    """Where the replicas record each request's cached tokens (the servers' shared context)."""

    @property
    def prefix_cached(self) -> Mapping[int, int]:
        """Request id -> prompt tokens its last prefill found cached."""
        ...


class PrefixCache:
    """The prefix caches of one replica, one radix tree per model (see the module docstring).

    Args:
        block_tokens: Tokens per block.
    """

    def __init__(self, block_tokens: int) -> None:
        if block_tokens < 1:
            raise ValueError(f"block_tokens must be >= 1, got {block_tokens}")
        self.block_tokens = block_tokens
        self._roots: dict[str, Block] = {}
        self._heap: list[tuple[float, int, int, Block]] = []
        self._seq = 0
        self.evictable_mb = 0.0
        """KV of the blocks no running request references (free-but-cached)."""
        self.lookups = 0
        self.blocks_queried = 0
        self.blocks_hit = 0
        self.prompt_tokens = 0
        self.tokens_hit = 0
        self.blocks_evicted = 0

    def _root(self, model: str) -> Block:
        root = self._roots.get(model)
        if root is None:
            root = self._roots[model] = Block(-1, None, 0, 0.0)
            root.refs = 1  # never evicted
        return root

    def usable_blocks(self, ids: tuple[int, ...], prompt_tokens: int) -> int:
        """How many leading blocks of a prompt a lookup may find (full blocks, one token left)."""
        return min(len(ids), (prompt_tokens - 1) // self.block_tokens)

    def match(self, model: str, ids: tuple[int, ...], prompt_tokens: int) -> list[Block]:
        """The cached blocks of the prompt's longest cached prefix (no side effect)."""
        node = self._roots.get(model)
        found: list[Block] = []
        if node is None:
            return found
        for key in ids[: self.usable_blocks(ids, prompt_tokens)]:
            child = node.children.get(key)
            if child is None:
                break
            found.append(child)
            node = child
        return found

    def count(self, ids: tuple[int, ...], prompt_tokens: int, hit: int) -> None:
        """Count one prefill's lookup that found ``hit`` blocks."""
        self.lookups += 1
        self.blocks_queried += self.usable_blocks(ids, prompt_tokens)
        self.blocks_hit += hit
        self.prompt_tokens += prompt_tokens
        self.tokens_hit += hit * self.block_tokens

    def pin(self, blocks: list[Block]) -> float:
        """Reference ``blocks``; return the KV of those that were free-but-cached."""
        revived = 0.0
        for block in blocks:
            if block.refs == 0:
                revived += block.mb
                block.entry = -1
            block.refs += 1
        self.evictable_mb -= revived
        return revived

    def unpin(self, blocks: list[Block], now_s: float) -> float:
        """Drop one reference to each of ``blocks``; return the KV of those now unreferenced."""
        freed = 0.0
        for block in blocks:
            block.refs -= 1
            block.last_used_s = now_s
            if block.refs == 0:
                freed += block.mb
                if not block.children:
                    self._push(block)
        self.evictable_mb += freed
        return freed

    def insert(
        self,
        model: str,
        ids: tuple[int, ...],
        held: list[Block],
        blocks: int,
        mb: float,
        now_s: float,
    ) -> tuple[list[Block], int, float]:
        """Cache a prefilled prompt's first ``blocks`` blocks beyond the ``held`` ones it found.

        ``held`` are the blocks its lookup found (its first ones, referenced
        for it). The next blocks are referenced for the request too: those not
        cached yet are added (its copy becomes the cached one), those another
        request cached meanwhile are shared (its own copy is dropped).
        Returns the blocks newly referenced for it, how many of them were
        added, and the KV of those that were free-but-cached.
        """
        node = held[-1] if held else self._root(model)
        added: list[Block] = []
        shared: list[Block] = []
        for depth in range(len(held) + 1, blocks + 1):
            key = ids[depth - 1]
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = Block(key, node, depth, mb)
                child.refs = 1
            else:
                shared.append(child)
            added.append(child)
            node = child
        revived = self.pin(shared)
        new = len(added) - len(shared)
        for block in held:
            block.last_used_s = now_s
        for block in added:
            block.last_used_s = now_s
        return added, new, revived

    def _push(self, block: Block) -> None:
        self._seq += 1
        block.entry = self._seq
        heapq.heappush(self._heap, (block.last_used_s, -block.depth, self._seq, block))

    def evict(self, needed_mb: float) -> float:
        """Evict free-but-cached blocks (LRU leaves first) until ``needed_mb`` is freed or none is left.

        Returns the KV freed (it was already counted free in the pool).
        """
        freed = 0.0
        heap = self._heap
        while freed < needed_mb - 1e-9 and heap:
            _t, _d, seq, block = heapq.heappop(heap)
            if block.entry != seq or block.refs or block.children:
                continue  # stale: referenced again, or it has grown children since
            parent = block.parent
            assert parent is not None
            del parent.children[block.key]
            block.entry = -1
            freed += block.mb
            self.evictable_mb -= block.mb
            self.blocks_evicted += 1
            if parent.refs == 0 and not parent.children:
                self._push(parent)
        return freed

    def stats(self) -> PrefixCacheStats:
        """The counts so far."""
        return PrefixCacheStats(
            self.lookups,
            self.blocks_queried,
            self.blocks_hit,
            self.prompt_tokens,
            self.tokens_hit,
            self.blocks_evicted,
        )
