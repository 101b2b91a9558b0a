"""What this process has written so far, for the message after Ctrl-C.

A command that swaps in a results set (or writes a table) notes it here the
moment it is in place; :func:`~simulator.cli_support.run_guarded` reads the
notes made since the command started, so an interrupt that comes after new
results are in place says so instead of claiming that nothing was written.
"""

from __future__ import annotations

from pathlib import Path

_WRITTEN: dict[Path, None] = {}
"""Every path noted, in the order first noted (a dict keeps the order and drops repeats)."""


def note(path: Path) -> None:
    """Record that new results are now in place at ``path``."""
    _WRITTEN.setdefault(path, None)


def mark() -> int:
    """How many paths have been noted so far (pass it to :func:`since`)."""
    return len(_WRITTEN)


def since(mark_: int) -> list[Path]:
    """The paths first noted after :func:`mark` returned ``mark_``."""
    return list(_WRITTEN)[mark_:]
