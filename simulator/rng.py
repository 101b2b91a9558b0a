"""Named random streams derived from one scenario seed.

The scenario holds a single integer ``seed``. Each concern of the simulation
(arrivals, lengths, acceptance sampling, network jitter, routing, ...) gets its
own :class:`numpy.random.Generator`, derived from
``numpy.random.SeedSequence(seed)`` and the stream's *name*, so that adding a
new stream never shifts the numbers an existing stream produces. Nothing in
the project uses the global ``random`` or ``numpy.random`` state.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np

STREAM_NAMES: tuple[str, ...] = (
    "arrivals",
    "lengths",
    "origins",
    "acceptance",
    "jitter",
    "routing",
    "devices",
    "policy",
    "think_time",
    "step_noise",
    "categories",
    "acceptance_levels",
    "prefixes",
    "sessions",
    "decode_routing",
)
"""The streams the simulator knows; :meth:`RandomStreams.get` rejects others."""


def _name_key(name: str) -> int:
    """Map a stream name to a stable 32-bit integer (independent of Python's hash seed)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little")


class RandomStreams:
    """Independent, reproducible random generators keyed by name.

    ``RandomStreams(seed).get("arrivals")`` always returns a generator in the
    same state for the same seed; each call returns a *fresh* generator, so a
    component should ask once and keep it.
    """

    def __init__(self, seed: int) -> None:
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self.seed = seed

    def get(self, name: str) -> np.random.Generator:
        """Return a new generator for the stream ``name``."""
        if name not in STREAM_NAMES:
            raise KeyError(f"unknown random stream {name!r}; known: {', '.join(STREAM_NAMES)}")
        sequence = np.random.SeedSequence(entropy=self.seed, spawn_key=(_name_key(name),))
        return np.random.Generator(np.random.PCG64(sequence))

    def child(self, name: str, index: int) -> np.random.Generator:
        """Return a generator for sub-stream ``index`` of stream ``name`` (e.g. per device)."""
        if name not in STREAM_NAMES:
            raise KeyError(f"unknown random stream {name!r}; known: {', '.join(STREAM_NAMES)}")
        if index < 0:
            raise ValueError(f"sub-stream index must be >= 0, got {index}")
        sequence = np.random.SeedSequence(entropy=self.seed, spawn_key=(_name_key(name), index))
        return np.random.Generator(np.random.PCG64(sequence))


class RequestUniforms:
    """One uniform draw in [0, 1) per request id, whatever order requests ask in.

    Request ``i`` gets element ``i % block`` of sub-stream ``i // block`` of
    one stream, so a request's draw does not depend on routing, timing or
    which other requests ran: the same request draws the same level in every
    variant of a scenario with the same seed.
    """

    __slots__ = ("_block", "_blocks", "_name", "_streams")

    def __init__(self, streams: RandomStreams, name: str, block: int = 4096) -> None:
        self._streams = streams
        self._name = name
        self._block = block
        self._blocks: dict[int, list[float]] = {}

    def at(self, request_id: int) -> float:
        """Return request ``request_id``'s draw."""
        index, offset = divmod(request_id, self._block)
        values = self._blocks.get(index)
        if values is None:
            if len(self._blocks) >= 8:
                self._blocks.clear()
            values = self._streams.child(self._name, index).random(self._block).tolist()
            self._blocks[index] = values
        return values[offset]


class BufferedDraws:
    """Scalar draws served from blocks of one generator, for hot loops.

    Drawing one scalar from a :class:`numpy.random.Generator` costs about a
    microsecond of call overhead; drawing a block of 4,096 costs nearly the
    same. ``random()`` and ``standard_normal()`` hand out the block's values
    one by one and refill from the same generator, so the sequence depends
    only on the generator's seed (each kind has its own block).
    """

    __slots__ = ("_block", "_normal", "_rng", "_uniform")

    def __init__(self, rng: np.random.Generator, block: int = 4096) -> None:
        if block < 1:
            raise ValueError(f"block must be >= 1, got {block}")
        self._rng = rng
        self._block = block
        # Iterators over the current blocks: one next() a draw (an index kept
        # beside the block cost a length check and two attribute writes).
        self._uniform: Iterator[float] = iter(())
        self._normal: Iterator[float] = iter(())

    def random(self) -> float:
        """Return the next uniform draw in [0, 1)."""
        value = next(self._uniform, None)
        if value is None:
            self._uniform = iter(self._rng.random(self._block).tolist())
            value = next(self._uniform)
        return value

    def standard_normal(self) -> float:
        """Return the next standard normal draw."""
        value = next(self._normal, None)
        if value is None:
            self._normal = iter(self._rng.standard_normal(self._block).tolist())
            value = next(self._normal)
        return value
