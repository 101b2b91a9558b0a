"""Token-length distributions for prompts and outputs.

Every distribution is a frozen dataclass with ``sample(n, rng)`` returning
``n`` int64 lengths >= 1 and ``mean_tokens()`` returning its mean. The
lognormal is parameterised by its median and the standard deviation
``sigma`` of ``ln(tokens)``, and truncated to ``[min_tokens, max_tokens]``
by *conditioning*: draws come from the distribution restricted to that range
(sampled exactly through the inverse normal CDF, never clipped, so no mass
piles up at the bounds), then rounded to the nearest whole token. Without a
``max_tokens`` it is truncated at
:data:`~simulator.workload.trace_table.MAX_REQUEST_TOKENS`, the longest
request a trace may hold too, so no draw overflows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.workload.arrays import IntArray, frozen
from simulator.workload.trace_table import MAX_REQUEST_TOKENS


@dataclass(frozen=True)
class FixedLength:
    """Every request gets the same length.

    Attributes:
        tokens: The length (>= 1).
    """

    tokens: int

    def __post_init__(self) -> None:
        if self.tokens < 1:
            raise ValueError(f"FixedLength.tokens must be >= 1, got {self.tokens}")

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        """Return ``n`` copies of the length (``rng`` is not used)."""
        return np.full(n, self.tokens, dtype=np.int64)

    def mean_tokens(self) -> float:
        """Return the mean length."""
        return float(self.tokens)


@dataclass(frozen=True)
class UniformLength:
    """Whole-token lengths drawn uniformly from ``low_tokens..high_tokens`` (inclusive).

    Attributes:
        low_tokens: Smallest length (>= 1).
        high_tokens: Largest length (>= low_tokens).
    """

    low_tokens: int
    high_tokens: int

    def __post_init__(self) -> None:
        if not 1 <= self.low_tokens <= self.high_tokens:
            raise ValueError(
                f"UniformLength needs 1 <= low <= high, got {self.low_tokens}..{self.high_tokens}"
            )

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        """Return ``n`` lengths."""
        return rng.integers(self.low_tokens, self.high_tokens, size=n, endpoint=True).astype(
            np.int64
        )

    def mean_tokens(self) -> float:
        """Return the mean length."""
        return (self.low_tokens + self.high_tokens) / 2.0


@dataclass(frozen=True)
class LognormalLength:
    """Lognormal lengths conditioned on ``[min_tokens, max_tokens]``, rounded to whole tokens.

    Attributes:
        median_tokens: Median of the untruncated distribution (``exp(mu)``).
        sigma: Standard deviation of ``ln(tokens)`` (> 0).
        min_tokens: Lower truncation bound (>= 1).
        max_tokens: Upper truncation bound (>= min_tokens); None for
            :data:`~simulator.workload.trace_table.MAX_REQUEST_TOKENS`.
    """

    median_tokens: float
    sigma: float
    min_tokens: int = 1
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if not (self.median_tokens > 0 and self.sigma > 0 and self.min_tokens >= 1):
            raise ValueError("LognormalLength needs median > 0, sigma > 0 and min_tokens >= 1")
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise ValueError(
                f"LognormalLength.max_tokens ({self.max_tokens}) < min_tokens ({self.min_tokens})"
            )

    def _bounds(self) -> tuple[float, float]:
        """Return the truncation bounds as standard-normal quantiles."""
        mu = math.log(self.median_tokens)
        low = (math.log(self.min_tokens) - mu) / self.sigma
        high = (math.log(self.upper_tokens()) - mu) / self.sigma
        return low, high

    def upper_tokens(self) -> int:
        """Return the upper truncation bound in effect (``max_tokens`` or the hard bound)."""
        return MAX_REQUEST_TOKENS if self.max_tokens is None else self.max_tokens

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        """Return ``n`` lengths (exact inverse-CDF sampling of the truncated normal)."""
        from scipy import special  # about 0.1 s to import: only when used

        low, high = self._bounds()
        if low > 0:
            # Both bounds in the upper tail: sample the mirror image, where
            # the normal CDF keeps its precision.
            u = rng.uniform(special.ndtr(-high), special.ndtr(-low), size=n)
            z = -special.ndtri(u)
        else:
            u = rng.uniform(special.ndtr(low), special.ndtr(high), size=n)
            z = special.ndtri(u)
        tokens = np.exp(math.log(self.median_tokens) + self.sigma * np.clip(z, low, high))
        top = float(self.upper_tokens())
        rounded: IntArray = np.rint(np.clip(tokens, self.min_tokens, top)).astype(np.int64)
        return rounded

    def mass(self) -> float:
        """Return the probability the untruncated distribution gives ``[min, max]``."""
        from scipy import special  # about 0.1 s to import: only when used

        low, high = self._bounds()
        if low > 0:
            return float(special.ndtr(-low) - special.ndtr(-high))
        return float(special.ndtr(high) - special.ndtr(low))

    def mean_tokens(self) -> float:
        """Return the mean of the truncated (continuous, unrounded) distribution."""
        from scipy import special  # about 0.1 s to import: only when used

        low, high = self._bounds()
        s = self.sigma
        scale = math.exp(math.log(self.median_tokens) + s * s / 2.0)
        if low > 0:
            inside = special.ndtr(s - low) - special.ndtr(s - high)
        else:
            inside = special.ndtr(high - s) - special.ndtr(low - s)
        mass = self.mass()
        if mass <= 0.0:
            return float(self.min_tokens)
        return float(scale * inside / mass)


@dataclass(frozen=True, eq=False)
class EmpiricalLength:
    """Lengths resampled (uniformly, with replacement) from the rows of a trace.

    Attributes:
        values_tokens: The pool of lengths (one per trace row, >= 1).
        trace: The file the pool was read from.
        format: The format it was read as.
        column: ``prompt_tokens`` or ``output_tokens``: which lengths of the
            trace form the pool.
        partner_tokens: The other length of the same rows (output lengths
            when ``column`` is ``prompt_tokens`` and vice versa), so that two
            empirical distributions over one trace can draw whole rows.
    """

    values_tokens: IntArray
    trace: Path
    format: str
    column: str
    partner_tokens: IntArray

    def __post_init__(self) -> None:
        if len(self.values_tokens) == 0 or int(self.values_tokens.min()) < 1:
            raise ValueError("EmpiricalLength needs a non-empty pool of lengths >= 1")
        if len(self.partner_tokens) != len(self.values_tokens):
            raise ValueError("EmpiricalLength.partner_tokens must match values_tokens")
        object.__setattr__(self, "values_tokens", frozen(self.values_tokens))
        object.__setattr__(self, "partner_tokens", frozen(self.partner_tokens))

    def sample(self, n: int, rng: np.random.Generator) -> IntArray:
        """Return ``n`` lengths drawn from the pool."""
        return self.values_tokens[self.sample_rows(n, rng)].astype(np.int64)

    def sample_rows(self, n: int, rng: np.random.Generator) -> IntArray:
        """Return ``n`` row indices into the pool (what :meth:`sample` draws)."""
        return rng.integers(0, len(self.values_tokens), size=n).astype(np.int64)

    def pairs_with(self, other: LengthDistribution) -> bool:
        """Whether ``other`` resamples the other length column of the same trace rows."""
        return (
            isinstance(other, EmpiricalLength)
            and other.trace == self.trace
            and other.format == self.format
            and other.column != self.column
            and np.array_equal(other.values_tokens, self.partner_tokens)
        )

    def mean_tokens(self) -> float:
        """Return the mean of the pool."""
        return float(self.values_tokens.mean())


LengthDistribution = FixedLength | UniformLength | LognormalLength | EmpiricalLength
"""Any of the length distributions."""


def sample_length_pairs(
    prompt: LengthDistribution,
    output: LengthDistribution,
    n: int,
    prompt_rng: np.random.Generator,
    output_rng: np.random.Generator,
) -> tuple[IntArray, IntArray]:
    """Draw ``n`` prompt and output lengths.

    The two are independent, except when both are empirical over the same
    trace (one resampling its prompt lengths, the other its output lengths):
    then whole rows are drawn (with ``prompt_rng``), so every request keeps a
    (prompt, output) pair that occurred together in the trace.
    """
    if isinstance(prompt, EmpiricalLength) and prompt.pairs_with(output):
        rows = prompt.sample_rows(n, prompt_rng)
        return prompt.values_tokens[rows].astype(np.int64), prompt.partner_tokens[rows].astype(
            np.int64
        )
    return prompt.sample(n, prompt_rng), output.sample(n, output_rng)
