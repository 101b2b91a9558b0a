"""The closed-loop driver: users that send their next request when the previous one ends.

Each of ``users`` users sends one request at a time. At t = 0 users
``0 .. users - 1`` send the table's first requests (one each, in table
order); whenever a user's request ends (it completes, i.e. its last token
reaches the client, or it is rejected) the user thinks for a time drawn from
the ``think_time`` stream and then sends the table's next unsent request.
The run ends when every request of the table has been sent and has ended, or
at the stop time. The table's arrival times are not used: a request's
``arrival_s`` is the instant its user sends it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import simpy

from simulator.engine.clock import call_at
from simulator.engine.request_state import RequestState
from simulator.workload.closed_loop import ClosedLoop


class ClosedLoopDriver:
    """Sends the engine's requests on behalf of a fixed population of users.

    Args:
        env: The simulation's clock.
        arrive: Admits a sent request (the engine's arrival handling).
        loop: The users and their think time.
        rng: The ``think_time`` stream.
    """

    def __init__(
        self,
        env: simpy.Environment,
        arrive: Callable[[RequestState], None],
        loop: ClosedLoop,
        rng: np.random.Generator,
    ) -> None:
        self.env = env
        self.arrive = arrive
        self.loop = loop
        self._states: Sequence[RequestState] = ()
        self.rng = rng
        self._next = 0
        self._user_of: dict[int, int] = {}
        """Request id -> the user that sent it."""

    def start(self, states: Sequence[RequestState]) -> None:
        """Schedule every user's first request at t = 0; ``states`` in table order."""
        self._states = states
        for user in range(self.loop.users):
            call_at(self.env, 0.0, partial(self._send, user))

    def _send(self, user: int) -> None:
        states = self._states
        if self._next >= len(states):
            return
        req = states[self._next]
        self._next += 1
        req.arrival_s = self.env._now
        self._user_of[req.request_id] = user
        self.arrive(req)

    def on_end(self, req: RequestState) -> None:
        """A request ended (completed or rejected): its user thinks, then sends the next."""
        user = self._user_of.pop(req.request_id, None)
        if user is None:  # not sent by a user (a what-if window's starting request)
            return
        env = self.env
        call_at(env, env._now + self.loop.think_time.sample(self.rng), partial(self._send, user))
