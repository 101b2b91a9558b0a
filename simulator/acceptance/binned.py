"""Shared machinery of the built-in acceptance models: bins, mixing, caching, sampling.

Every built-in kind describes, for one bin and one draft length ``k``, the
*survival curve* ``S_i = P(A >= i)`` for ``i = 1..k`` (non-increasing). A
query between bins mixes the neighbouring bins' distributions with linear
weights (see :mod:`simulator.acceptance.grid`), so every ``P(A >= i)`` and
``E[A] = sum_i S_i`` is interpolated linearly. Sampling draws one uniform
``u`` and returns the number of ``S_i`` greater than ``u``, found by bisection
on a cached, precomputed curve.

A curve may also hold bins per task category (a model per category, built
by the loader) and answers one request through :meth:`BinnedModel.for_request`:
the request's category's model, at the request's spread level when a spread
is set (:class:`SpreadView`, see :mod:`simulator.acceptance.spread`).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

import numpy as np

from simulator.acceptance.grid import BinGrid
from simulator.acceptance.info import CurveInfo, DescribedCurve
from simulator.acceptance.protocol import AcceptanceModel, RequestTraits, UniformSource
from simulator.acceptance.spread import level_of, spread_survival


class _Keyed(Protocol):
    @property
    def context_len(self) -> int: ...

    @property
    def temperature(self) -> float: ...


BinT = TypeVar("BinT", bound=_Keyed)


class _Prepared(NamedTuple):
    """A survival curve ready for sampling: negated (ascending) and as an array."""

    negated: tuple[float, ...]
    negated_array: np.ndarray
    expected: float


def check_sample_count(n: int) -> None:
    """Refuse a negative number of draws (``sample_accepted_many``)."""
    if n < 0:
        raise ValueError(f"sample count n must be >= 0, got {n}")


def _check_k(k: int) -> None:
    if k < 0:
        raise ValueError(f"draft length k must be >= 0, got {k}")


class BinnedModel(DescribedCurve, Generic[BinT]):
    """An acceptance model defined bin by bin through survival curves.

    Subclasses set :attr:`kind` and implement :meth:`bin_survival`.

    Attributes:
        info: The curve's descriptive fields.
        bins: The curve's bins, sorted by (temperature, context_len).
    """

    kind: ClassVar[str] = ""
    cache_limit: ClassVar[int] = 1 << 16
    """Cached (k, context_len within the grid's context span, temperature) queries kept before the
    cache is reset."""

    def __init__(self, info: CurveInfo, bins: Sequence[BinT]) -> None:
        if not bins:
            raise ValueError("an acceptance model needs at least one bin")
        self.info = info
        self.bins: tuple[BinT, ...] = tuple(bins)
        self._grid = BinGrid.from_keys([(b.temperature, b.context_len) for b in self.bins])
        self._bin_curves: dict[tuple[int, int], tuple[float, ...]] = {}
        self._prepared: dict[tuple[int, float, float], _Prepared] = {}
        # Queries are cached by their context clamped to this span, outside which the
        # weights do not change: a curve without context bins has one entry per
        # (k, temperature), not one per context a run reaches.
        self._context_lo, self._context_hi = self._grid.context_span
        self._by_category: dict[str, BinnedModel[Any]] = {}
        self._views: dict[tuple[str, int, float], SpreadView] = {}

    def set_categories(self, models: Mapping[str, BinnedModel[Any]]) -> None:
        """Attach the per-category models (the loader does this once, right after building)."""
        self._by_category = dict(models)
        self._views.clear()

    @property
    def temperatures(self) -> tuple[float, ...]:
        """The distinct bin temperatures of the curve and its categories, ascending."""
        found = set(self._grid.temperatures)
        for model in self._by_category.values():
            found.update(model.temperatures)
        return tuple(sorted(found))

    @property
    def categories(self) -> tuple[str, ...]:
        """The task categories with their own bins, sorted."""
        return tuple(sorted(self._by_category))

    @property
    def max_k(self) -> int | None:
        """Binned curves answer for any draft length."""
        return None

    def for_request(
        self, traits: RequestTraits, concentration: float | None = None
    ) -> AcceptanceModel:
        """Return the request's category's model, at its spread level when a spread is set.

        A curve without categories serves every request's category; a request
        without a category uses the curve's own bins.

        Raises:
            ValueError: The curve has categories but not the request's.
        """
        category = traits.category if self._by_category else ""
        base: BinnedModel[Any] = self
        if category:
            found = self._by_category.get(category)
            if found is None:
                raise ValueError(
                    f"acceptance curve {self.name!r} has no bins for category {category!r}; "
                    f"it has {', '.join(self.categories)}"
                )
            base = found
        if concentration is None:
            return base
        level = level_of(traits.quantile)
        key = (category, level, concentration)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = SpreadView(base, concentration, level)
        return view

    def bin_survival(self, index: int, k: int) -> tuple[float, ...]:
        """Return ``(P(A >= 1), ..., P(A >= k))`` for bin ``index`` (non-increasing).

        Args:
            index: Position of the bin in :attr:`bins`.
            k: Draft length, ``>= 0``.
        """
        raise NotImplementedError

    def _cached_bin_survival(self, index: int, k: int) -> tuple[float, ...]:
        key = (index, k)
        curve = self._bin_curves.get(key)
        if curve is None:
            curve = self.bin_survival(index, k)
            self._bin_curves[key] = curve
        return curve

    def _prepare(self, k: int, context_len: float, temperature: float) -> _Prepared:
        context_len = min(max(context_len, self._context_lo), self._context_hi)
        key = (k, context_len, temperature)
        prepared = self._prepared.get(key)
        if prepared is not None:
            return prepared
        _check_k(k)
        mixed = [0.0] * k
        for index, weight in self._grid.weights(context_len, temperature):
            for position, value in enumerate(self._cached_bin_survival(index, k)):
                mixed[position] += weight * value
        # Guard against rounding pushing a mixed value past its neighbours or [0, 1].
        running = 1.0
        for position, value in enumerate(mixed):
            running = min(running, max(value, 0.0))
            mixed[position] = running
        negated = tuple(-value for value in mixed)
        prepared = _Prepared(negated, np.asarray(negated, dtype=float), math.fsum(mixed))
        if len(self._prepared) >= self.cache_limit:
            self._prepared.clear()
        self._prepared[key] = prepared
        return prepared

    def survival(self, k: int, context_len: int, temperature: float = 0.0) -> tuple[float, ...]:
        """Return ``(P(A >= 1), ..., P(A >= k))`` at a context length and temperature."""
        return tuple(-value for value in self._prepare(k, context_len, temperature).negated)

    def expected_accepted(self, k: int, context_len: int, temperature: float = 0.0) -> float:
        """Return E[A], the mean number of accepted draft tokens (bonus excluded)."""
        return self._prepare(k, context_len, temperature).expected

    def expected_tokens_per_verify(
        self, k: int, context_len: int, temperature: float = 0.0
    ) -> float:
        """Return E[A + 1], the mean number of tokens one verify round produces."""
        return self._prepare(k, context_len, temperature).expected + 1.0

    def sample_accepted(
        self, k: int, context_len: int, rng: UniformSource, temperature: float = 0.0
    ) -> int:
        """Draw A in ``0..k`` for one verify round, using exactly one ``rng.random()``."""
        # The cache key's clamp (see __init__), inlined: this runs once a round.
        if context_len < self._context_lo:
            context_len = self._context_lo
        elif context_len > self._context_hi:
            context_len = self._context_hi
        prepared = self._prepared.get((k, context_len, temperature))
        if prepared is None:
            prepared = self._prepare(k, context_len, temperature)
        return bisect_left(prepared.negated, -rng.random())

    def sample_accepted_many(
        self,
        k: int,
        context_len: int,
        n: int,
        rng: np.random.Generator,
        temperature: float = 0.0,
    ) -> np.ndarray:
        """Draw ``n`` values of A; equal to ``n`` calls of :meth:`sample_accepted` on ``rng``."""
        check_sample_count(n)
        prepared = self._prepare(k, context_len, temperature)
        uniforms = rng.random(n)
        return np.searchsorted(prepared.negated_array, -uniforms, side="left").astype(np.int64)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, method={self.method!r}, "
            f"bins={len(self.bins)})"
        )


class SpreadView(BinnedModel[Any]):
    """A curve seen by the requests of one spread level (see :mod:`simulator.acceptance.spread`).

    Args:
        base: The curve (or one category's curve).
        concentration: The spread's Beta concentration.
        level: The level's stratum.
    """

    def __init__(self, base: BinnedModel[Any], concentration: float, level: int) -> None:
        super().__init__(base.info, base.bins)
        self._base = base
        self.concentration = concentration
        self.level = level

    def bin_survival(self, index: int, k: int) -> tuple[float, ...]:
        """Return the base curve's bin survival moved to this level."""
        return spread_survival(
            self._base._cached_bin_survival(index, k), self.concentration, self.level
        )

    def for_request(
        self, traits: RequestTraits, concentration: float | None = None
    ) -> AcceptanceModel:
        """A level's view is already one request's curve; it answers for itself."""
        return self
