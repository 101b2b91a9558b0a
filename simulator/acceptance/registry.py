"""Acceptance model kinds: the ``kind`` string of a curve file → the function that builds it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from simulator.acceptance.iid import build_iid, check_iid
from simulator.acceptance.per_k import build_per_k, check_per_k
from simulator.acceptance.positional import build_positional, check_positional
from simulator.acceptance.protocol import AcceptanceModel
from simulator.acceptance.replay import build_replay, check_replay
from simulator.errors import InputError, Issue, make_issue
from simulator.suggest import did_you_mean

Builder = Callable[[Mapping[str, Any], Path], AcceptanceModel]
"""Builds a model from a schema-valid, default-filled document and its file path."""

Checker = Callable[[Mapping[str, Any], Path], list[Issue]]
"""Returns the cross-field problems of a document that may also fail the schema."""

_BUILDERS: dict[str, Builder] = {
    "iid": build_iid,
    "per_k": build_per_k,
    "positional": build_positional,
    "replay": build_replay,
}
_CHECKERS: dict[str, Checker] = {
    "iid": check_iid,
    "per_k": check_per_k,
    "positional": check_positional,
    "replay": check_replay,
}


def kinds() -> tuple[str, ...]:
    """Return the registered kind names, sorted."""
    return tuple(sorted(_BUILDERS))


def register_kind(kind: str, builder: Builder, checker: Checker | None = None) -> None:
    """Register a builder (and optionally a cross-field checker) for a new ``kind``.

    A new kind's bins are not checked by the packaged schema (only the common
    fields are); its builder must validate them and raise
    :class:`~simulator.errors.InputError`.

    Raises:
        ValueError: ``kind`` is already registered.
    """
    if kind in _BUILDERS:
        raise ValueError(f"acceptance model kind {kind!r} is already registered")
    _BUILDERS[kind] = builder
    if checker is not None:
        _CHECKERS[kind] = checker


def cross_field_issues(kind: str, document: Mapping[str, Any], file: Path) -> list[Issue]:
    """Return the cross-field problems of a document of a registered ``kind``.

    Runs even when the document fails the schema, so that all problems are
    reported at once; kinds without a checker return no issues.
    """
    checker = _CHECKERS.get(kind)
    return checker(document, file) if checker is not None else []


def unknown_kind_issue(kind: object, file: Path) -> Issue:
    """Return the issue for a ``kind`` that is not registered, listing the valid ones."""
    valid = kinds()
    hint = did_you_mean(kind, valid)
    return make_issue(
        file, "kind", kind, "one of " + ", ".join(repr(k) for k in valid), f"unknown kind{hint}"
    )


def builder_for(kind: str, file: Path) -> Builder:
    """Return the builder of ``kind``.

    Raises:
        InputError: ``kind`` is not registered; the message lists the valid kinds.
    """
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise InputError([unknown_kind_issue(kind, file)])
    return builder
