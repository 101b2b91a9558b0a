"""The interface every acceptance model offers to the engine and the planner."""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from simulator.acceptance.info import CurveInfo


class UniformSource(Protocol):
    """A source of uniform draws: a numpy ``Generator`` or ``simulator.rng.BufferedDraws``."""

    def random(self) -> float:
        """Return one uniform draw in [0, 1)."""
        ...


class RequestTraits(NamedTuple):
    """What a curve may specialise on for one request (see :meth:`AcceptanceModel.for_request`).

    Attributes:
        request_id: The request's id.
        category: Its task category ("" for none).
        quantile: Its acceptance level, a uniform draw in [0, 1) of the
            ``acceptance_levels`` stream made for this request id alone.
    """

    request_id: int
    category: str
    quantile: float


@runtime_checkable
class AcceptanceModel(Protocol):
    """How many of ``k`` drafted tokens the target accepts in one verify round.

    ``A`` below is the number of accepted draft tokens, ``0 <= A <= k``; the
    verify round always yields one more token from the target itself (the
    correction or bonus token), so it produces ``A + 1`` tokens.
    """

    @property
    def name(self) -> str:
        """The curve's name."""
        ...

    @property
    def method(self) -> str:
        """The speculation method the curve describes (e.g. ``eagle3``)."""
        ...

    @property
    def info(self) -> CurveInfo:
        """What the curve was measured on: topology, target, drafter, dataset, engine, source."""
        ...

    @property
    def temperatures(self) -> tuple[float, ...]:
        """The distinct sampling temperatures the curve holds data for, ascending."""
        ...

    @property
    def categories(self) -> tuple[str, ...]:
        """The task categories with their own data, sorted (empty: one curve for all tasks)."""
        ...

    @property
    def max_k(self) -> int | None:
        """The largest draft length the curve can answer for (None: any)."""
        ...

    def for_request(
        self, traits: RequestTraits, concentration: float | None = None
    ) -> AcceptanceModel:
        """Return the model one request's rounds draw from.

        Args:
            traits: The request's id, category and acceptance level.
            concentration: Beta concentration of the spread between requests
                (None: every request of a category draws from the same curve).

        Raises:
            ValueError: The category has no data in this curve, or the curve
                cannot spread (a replayed one).
        """
        ...

    def expected_accepted(self, k: int, context_len: int, temperature: float = 0.0) -> float:
        """Return E[A], the mean number of accepted draft tokens (bonus excluded)."""
        ...

    def expected_tokens_per_verify(
        self, k: int, context_len: int, temperature: float = 0.0
    ) -> float:
        """Return E[A + 1], the mean number of tokens one verify round produces."""
        ...

    def sample_accepted(
        self, k: int, context_len: int, rng: UniformSource, temperature: float = 0.0
    ) -> int:
        """Draw A for one verify round, using exactly one ``rng.random()``."""
        ...

    def sample_accepted_many(
        self, k: int, context_len: int, n: int, rng: np.random.Generator
    ) -> np.ndarray:
        """Draw ``n`` independent values of A (vectorised; for tests and benchmarks)."""
        ...
