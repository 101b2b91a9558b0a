"""Objects built from input files, kept per process by the file's name and content.

A sweep, a capacity search or a planner study loads the same LUTs, device
profiles and engine profiles for every run it makes. Their loaders keep what
they built in a :class:`BuiltFromFiles`, under the name the file was loaded by
and the SHA-256 of its bytes: a file edited between two loads is built again
(the key changes with the content), and one read again unchanged is not parsed
or checked a second time. Only files whose object depends on nothing but their
own bytes and name are kept this way (an acceptance curve may name a replay
log, so it is built afresh each time). Every run that loads the file shares the
one object kept: profiles are frozen, and a LUT table changes only its own
cache of answers (the same for every run).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


def content_digest(data: bytes) -> str:
    """Return the SHA-256 hex digest of a file's bytes."""
    return hashlib.sha256(data).hexdigest()


class BuiltFromFiles(Generic[T]):
    """The objects a loader built, by ``(name, content digest)``, least recently used dropped.

    Args:
        size: How many objects are kept.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size = size
        self._kept: OrderedDict[tuple[str, str], T] = OrderedDict()

    def load(self, name: str, data: bytes, build: Callable[[], T]) -> T:
        """The object built from ``data`` under ``name``: kept, or ``build()`` now and kept.

        ``build`` raises for a bad file; nothing is kept then, so the next load
        reports the file's problems again.
        """
        key = (name, content_digest(data))
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
            return found
        built = build()
        self._kept[key] = built
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return built

    def clear(self) -> None:
        """Forget every object kept."""
        self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)
