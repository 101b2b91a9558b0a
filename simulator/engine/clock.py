"""Actions on the SimPy clock, with an explicit order among those of one instant.

SimPy processes events by time, then priority, then the order in which they
were scheduled. The engine uses two priorities:

- :data:`DELIVERY` for everything that *brings* work somewhere: a request
  arriving, a prompt or result reaching the other end of a link, a device
  finishing a prefill.
- :data:`DECISION` for a server choosing its next iteration: a target
  replica finishing an iteration, or waking up to pick work. Decisions of an
  instant run after every delivery of that instant, so work that arrives at
  the same moment as a replica becomes free joins its next batch.

Actions are plain callables scheduled with :func:`call_at` (at exactly the
time it is given, so that actions due at one time are one instant whenever
they were scheduled) or :func:`call_after`; nothing here keeps state of its own. The engine
schedules only bound methods and ``functools.partial`` objects over them
(no closures, no generator processes), so a stopped engine, its pending
actions included, can be deep-copied to continue a what-if window.

The engine reads the time as ``env._now``, the attribute SimPy's ``now``
property returns: a distributed run reads it about seven times a verify
round, and the property call cost 5 % of its wall time (``tests/test_engine_order.py``
checks that the two agree, so a SimPy release that changes this fails there).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush

import simpy
from simpy.core import StopSimulation

DELIVERY = 1
"""Priority of actions that deliver work (SimPy's ``NORMAL``, as its timeouts use)."""
DECISION = 2
"""Priority of a server's scheduling decision: after every delivery of the instant."""
URGENT = 0
"""Priority of starting a chain of actions at the start of a run (as SimPy starts a process)."""


class _Action:
    """An action on the clock: an event already triggered when scheduled.

    SimPy's loop reads three things of what it pops from its queue: the
    ``callbacks`` (which it takes and sets to ``None``), ``_ok`` and, when
    that is false, ``_value``. An action has them and nothing more: it is
    not a :class:`simpy.events.Event`, so scheduling one sets two slots
    instead of an event's dictionary, and its callbacks are one shared tuple
    (SimPy only iterates and slices them), not a new list and bound method.
    """

    __slots__ = ("_action", "callbacks")

    _ok = True
    """Always succeeded (read by SimPy's loop)."""
    _value = None
    observer = False
    """Whether the action only watches the run (see :func:`only_observers_pending`)."""

    def __init__(
        self,
        env: simpy.Environment,
        delay_s: float,
        action: Callable[[], None],
        priority: int,
        at_s: float | None = None,
    ) -> None:
        self.callbacks: tuple[Callable[[_Action], None], ...] | None = _RUN
        self._action = action
        if at_s is None:
            env.schedule(self, priority, delay_s)  # type: ignore[arg-type]
        else:
            # At exactly ``at_s`` (as Environment.schedule does, without the
            # rounding of now + (at_s - now)): actions due at one instant stay
            # one instant, in the order they were scheduled.
            heappush(env._queue, (at_s, priority, next(env._eid), self))  # type: ignore[misc]


class _Observer(_Action):
    """An action that only watches the run (the time-series sampler, a planner round)."""

    __slots__ = ()

    observer = True


def _run(event: _Action) -> None:
    """Run the action of a processed :class:`_Action` (its only callback)."""
    event._action()


_RUN = (_run,)
"""The callbacks of every :class:`_Action`."""


def call_at(
    env: simpy.Environment,
    time_s: float,
    action: Callable[[], None],
    priority: int = DELIVERY,
    observer: bool = False,
) -> None:
    """Run ``action()`` at simulated time ``time_s`` (now if it is in the past).

    Args:
        env: The simulation's environment (its one clock).
        time_s: When to run the action.
        action: What to run.
        priority: :data:`DELIVERY` or :data:`DECISION` (see the module docstring).
        observer: The action only watches the run (see :func:`only_observers_pending`).
    """
    kind = _Observer if observer else _Action
    if time_s > env._now:
        kind(env, 0.0, action, priority, at_s=time_s)
    else:
        kind(env, 0.0, action, priority)


def call_after(
    env: simpy.Environment,
    delay_s: float,
    action: Callable[[], None],
    priority: int = DELIVERY,
    observer: bool = False,
) -> None:
    """Run ``action()`` ``delay_s`` seconds from now (as a SimPy timeout of that delay would).

    Args:
        env: The simulation's environment.
        delay_s: Seconds from now (not negative).
        action: What to run.
        priority: :data:`URGENT`, :data:`DELIVERY` or :data:`DECISION`.
        observer: The action only watches the run (see :func:`only_observers_pending`).
    """
    (_Observer if observer else _Action)(env, delay_s, action, priority)


def only_observers_pending(env: simpy.Environment) -> bool:
    """Whether every action left on the clock only watches the run (``observer``).

    The time-series sampler and the planner's rounds are such actions, and so
    is the stop at ``until_s`` a run may have; with nothing else pending, no
    request can progress: the run has ended, or it has stalled.
    """
    return all(
        getattr(event, "observer", False) or StopSimulation.callback in (event.callbacks or ())
        for _time, _priority, _eid, event in env._queue
    )
