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

from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from simulator.engine.clock import call_at
from simulator.engine.request_state import RequestState
from simulator.workload.closed_loop import ClosedLoop

if TYPE_CHECKING:
    from simulator.engine.core import Engine


class ClosedLoopDriver:
    """Sends the engine's requests on behalf of a fixed population of users.

    Args:
        engine: The engine whose request states are sent (in table order).
        loop: The users and their think time.
        rng: The ``think_time`` stream.
    """

    def __init__(self, engine: Engine, loop: ClosedLoop, rng: np.random.Generator) -> None:
        self.engine = engine
        self.loop = loop
        self.rng = rng
        self._next = 0
        self._user_of: dict[int, int] = {}
        """Request id -> the user that sent it."""

    def start(self) -> None:
        """Schedule every user's first request at t = 0."""
        for user in range(self.loop.users):
            call_at(self.engine.env, 0.0, partial(self._send, user))

    def _send(self, user: int) -> None:
        states = self.engine._states
        if self._next >= len(states):
            return
        req = states[self._next]
        self._next += 1
        req.arrival_s = self.engine.env.now
        self._user_of[req.request_id] = user
        self.engine._arrive(req)

    def on_end(self, req: RequestState) -> None:
        """A request ended (completed or rejected): its user thinks, then sends the next."""
        user = self._user_of.pop(req.request_id, None)
        if user is None:  # not sent by a user (a what-if window's starting request)
            return
        env = self.engine.env
        call_at(env, env.now + self.loop.think_time.sample(self.rng), partial(self._send, user))
