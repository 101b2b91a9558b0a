"""One "did you mean" for every message that refuses a name.

Every loader, registry and command that refuses a name it does not know
(a key, a column, a policy, a device, a subcommand) offers the closest known
names through :func:`close_matches` and words the hint with :func:`did_you_mean`,
so the same misspelling gets the same suggestion everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.6
"""The least :class:`difflib.SequenceMatcher` ratio a known name needs to be suggested."""


def close_matches(word: object, options: Iterable[str], most: int = 1) -> list[str]:
    """Return up to ``most`` known names closest to ``word``, best first."""
    return difflib.get_close_matches(str(word), list(options), n=most, cutoff=CUTOFF)


def did_you_mean(word: object, options: Iterable[str], prefix: str = "; ") -> str:
    """Return ``"; did you mean 'x'?"`` for the closest known name, or ``""``.

    ``prefix`` goes before the hint (``"; "`` to follow a clause, ``" ("`` with
    a closing parenthesis added for a parenthesised hint).
    """
    close = close_matches(word, options)
    if not close:
        return ""
    hint = f"did you mean {close[0]!r}?"
    return f"{prefix}{hint})" if prefix.endswith("(") else f"{prefix}{hint}"
