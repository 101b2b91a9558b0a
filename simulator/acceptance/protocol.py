"""The interface every acceptance model offers to the engine and the planner."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


class UniformSource(Protocol):
    """A source of uniform draws: a numpy ``Generator`` or ``simulator.rng.BufferedDraws``."""

    def random(self) -> float:
        """Return one uniform draw in [0, 1)."""
        ...


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
