"""One loaded LUT file: its keys, grids and memoised lookups."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from simulator.errors import InputError, Issue, make_issue
from simulator.lut.interpolate import KeyGrid, OutOfRange

LOOKUP_CACHE_SIZE = 65536
"""Most distinct queries remembered per table (least recently used ones are dropped)."""


@dataclass(frozen=True, eq=False)
class LutKey:
    """Selects one grid of a LUT: what runs where, how split and in which format.

    Keys are compared by value; the hash is computed once, as keys are hashed
    on every lookup.

    Attributes:
        phase: ``prefill``, ``draft_decode``, ``verify`` or ``fused_decode``.
        model: Model id, e.g. ``llama-2-7b``.
        hardware: Hardware id, e.g. ``a100-sxm4-80gb``.
        tensor_parallel: Tensor-parallel degree.
        pipeline_parallel: Pipeline-parallel degree.
        dtype: ``fp16``, ``bf16`` or ``fp8``.
    """

    phase: str
    model: str
    hardware: str
    tensor_parallel: int
    pipeline_parallel: int
    dtype: str
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(self._fields()))

    def _fields(self) -> tuple[str, str, str, int, int, str]:
        return (
            self.phase,
            self.model,
            self.hardware,
            self.tensor_parallel,
            self.pipeline_parallel,
            self.dtype,
        )

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[LutKey], tuple[str, str, str, int, int, str]]:
        """Pickle as the fields: the cached hash of text differs between processes."""
        return (type(self), self._fields())

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, LutKey):
            return NotImplemented
        return self._hash == other._hash and self._fields() == other._fields()

    def describe(self) -> str:
        """Render the key for messages, e.g. ``phase=verify model=... tp=1 pp=1 dtype=fp16``."""
        return (
            f"phase={self.phase} model={self.model} hardware={self.hardware} "
            f"tp={self.tensor_parallel} pp={self.pipeline_parallel} dtype={self.dtype}"
        )


@dataclass(frozen=True)
class LutResult:
    """The cost of one iteration, as looked up (and interpolated) in a LUT.

    Attributes:
        latency_ms: Wall-clock time of the iteration, in milliseconds.
        energy_mj: Energy of the iteration, in millijoules.
        peak_mem_mb: Peak memory during the iteration over the replica, in MB.
        kv_delta_mb: KV cache the iteration adds for the whole batch, in MB.
    """

    latency_ms: float
    energy_mj: float
    peak_mem_mb: float
    kv_delta_mb: float


LutPoint = LutResult
"""Another name for :class:`LutResult` (one point of a LUT)."""


class LutGrid(NamedTuple):
    """The sorted grid axes of one LUT key."""

    context_len: tuple[int, ...]
    microbatch: tuple[int, ...]
    fanout_k: tuple[int, ...]


def unknown_key_issue(file: str, key: LutKey, available: Iterable[LutKey]) -> Issue:
    """Describe a lookup of a key nobody provides, listing what is there for its model/hardware."""
    keys = list(available)
    same = sorted(
        f"{k.phase}/tp{k.tensor_parallel}/pp{k.pipeline_parallel}/{k.dtype}"
        for k in keys
        if k.model == key.model and k.hardware == key.hardware
    )
    if same:
        allowed = f"a key present for {key.model} on {key.hardware}: " + ", ".join(same)
    else:
        pairs = sorted({f"{k.model} on {k.hardware}" for k in keys})
        allowed = (
            f"no keys exist for {key.model} on {key.hardware}; present: " + ", ".join(pairs)
            if pairs
            else "no LUT keys are loaded"
        )
    short = f"{key.phase}/tp{key.tensor_parallel}/pp{key.pipeline_parallel}/{key.dtype}"
    return make_issue(
        file, f"lookup of {key.describe()}", short, allowed, "no LUT rows for this key"
    )


class LutTable:
    """The grids of one LUT file.

    Lookups are memoised per table: an exact repeat of a query (same key,
    values and out-of-range rule) is answered from a bounded LRU cache.

    Args:
        path: The file the table was loaded from.
        grids: The grid of every key in the file.
        digest: SHA-256 of the file's content (empty when not from a file).
        row_count: Number of data rows in the file.
        cache_size: Most distinct queries remembered.
    """

    def __init__(
        self,
        path: Path,
        grids: Mapping[LutKey, KeyGrid],
        digest: str = "",
        row_count: int = 0,
        cache_size: int = LOOKUP_CACHE_SIZE,
    ) -> None:
        self.path = path
        self.digest = digest
        self.row_count = row_count
        self._grids = dict(grids)
        self._keys = frozenset(self._grids)
        self._cache_size = cache_size
        self._memo = lru_cache(maxsize=cache_size)(self._compute)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the table without its lookup cache (a bound cache cannot be pickled)."""
        state = dict(self.__dict__)
        del state["_memo"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled table with an empty lookup cache."""
        self.__dict__.update(state)
        self._memo = lru_cache(maxsize=self._cache_size)(self._compute)

    def __repr__(self) -> str:
        return f"LutTable({str(self.path)!r}, {len(self._keys)} keys, {self.row_count} rows)"

    def keys(self) -> frozenset[LutKey]:
        """Return every key the file provides."""
        return self._keys

    def has(self, key: LutKey) -> bool:
        """Return whether the file provides ``key``."""
        return key in self._grids

    def _grid_of(self, key: LutKey) -> KeyGrid:
        grid = self._grids.get(key)
        if grid is None:
            raise InputError([unknown_key_issue(str(self.path), key, self._keys)])
        return grid

    def grid(self, key: LutKey) -> LutGrid:
        """Return the sorted context_len, microbatch and fanout_k axes of ``key``.

        Raises:
            InputError: The file has no rows for ``key``.
        """
        found = self._grid_of(key)
        return LutGrid(found.context_len, found.microbatch, found.fanout_k)

    def has_energy(self, key: LutKey) -> bool:
        """Return whether some row of ``key`` has a positive ``energy_mj``.

        Raises:
            InputError: The file has no rows for ``key``.
        """
        return self._grid_of(key).has_energy()

    def lookup(
        self,
        key: LutKey,
        context_len: float,
        microbatch: float,
        fanout_k: float,
        out_of_range: OutOfRange = "raise",
    ) -> LutResult:
        """Return the cost of one iteration, interpolated on the grid of ``key``.

        Args:
            key: Which grid.
            context_len: Tokens of context per sequence (may be fractional,
                e.g. a batch's mean).
            microbatch: Sequences in the batch.
            fanout_k: Draft length k (1 for prefill and draft_decode).
            out_of_range: What to do outside the grid (see :data:`OutOfRange`).

        Raises:
            InputError: The file has no rows for ``key``, or a value is outside
                the grid and ``out_of_range`` is ``raise``.
        """
        return self._memo(key, context_len, microbatch, fanout_k, out_of_range)

    def _compute(
        self,
        key: LutKey,
        context_len: float,
        microbatch: float,
        fanout_k: float,
        out_of_range: OutOfRange,
    ) -> LutResult:
        grid = self._grids.get(key)
        if grid is None:
            grid = self._grid_of(key)
        return LutResult(*grid.evaluate(context_len, microbatch, fanout_k, out_of_range))

    def memoised_lookup(self) -> Callable[[LutKey, float, float, float, OutOfRange], LutResult]:
        """Return the memoised lookup function itself (positional arguments only).

        It takes the arguments of :meth:`lookup`, all positional, and skips
        one Python call per lookup; :class:`~simulator.lut.LutManager` uses it.
        """
        return self._memo

    def cache_info(self) -> tuple[int, int, int]:
        """Return ``(hits, misses, current size)`` of the lookup cache."""
        info = self._memo.cache_info()
        return info.hits, info.misses, info.currsize

    def clear_cache(self) -> None:
        """Forget every memoised lookup."""
        self._memo.cache_clear()
