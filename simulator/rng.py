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
