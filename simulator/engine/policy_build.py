"""Building a run's policy objects from the scenario's choices.

A built-in policy is built as is. A plug-in's constructor is the user's
code: whatever it raises (``SystemExit`` and ``KeyboardInterrupt`` included)
becomes one input error naming the scenario key that chose it, its module and
the exception's first line. A worker process that did not load the scenario
(a spawned pool worker, a Ray worker) imports an import-path policy under
the consent of ``SPECDEC_ALLOW_PLUGINS`` (see :mod:`policies.plugins`).
"""

from __future__ import annotations

from typing import Any

from policies.plugins import (
    PLUGIN_FAILURES,
    PolicyImportError,
    first_line,
    is_plugin,
    policy_class,
)
from simulator.errors import InputError, make_issue
from simulator.rng import RandomStreams
from simulator.scenario.model import PolicyChoice


def _issue(choice: PolicyChoice, allowed: str, problem: str) -> InputError:
    file = choice.file or "scenario"
    key = choice.key or f"({choice.family} policy)"
    return InputError([make_issue(file, key, choice.name, allowed, problem)])


def instantiate(
    choice: PolicyChoice,
    *args: Any,
    streams: RandomStreams | None = None,
    stream: str | None = None,
) -> Any:
    """Build the chosen policy; one whose class names a ``random_stream`` gets it as ``rng``.

    ``stream`` replaces the class's stream name: a second policy of a family
    in one run (``scheduler.routing.decode`` beside ``scheduler.routing``)
    draws from its own stream instead of repeating the first one's numbers.

    Raises:
        InputError: A plug-in that cannot be imported here, or whose
            constructor failed.
    """
    try:
        cls = policy_class(choice.family, choice.name)
    except PolicyImportError as exc:
        raise _issue(choice, exc.allowed, exc.problem) from None
    drawn = cls.random_stream
    try:
        if drawn is not None:
            assert streams is not None, f"policy {choice.name} draws from stream {drawn!r}"
            return cls(*args, choice.params, rng=streams.get(stream or drawn))
        return cls(*args, choice.params)
    except PLUGIN_FAILURES as exc:
        if not is_plugin(choice.family, choice.name):
            raise  # a built-in's bug, not the user's input
        raise _issue(
            choice,
            "a policy class whose constructor returns normally",
            f"constructing {cls.__module__}.{cls.__qualname__} (module {cls.__module__!r}) "
            f"failed: {first_line(exc)}",
        ) from None
