"""The draft-length loop: choosing each round's k and settling each verified round.

:class:`Speculation` owns the k controller (swapped mid-run by a planner),
the acceptance draws, the draft-length bounds and the per-replica
iteration-time predictors a controller may read. Servers reach it through
their :class:`~simulator.engine.lifecycle.ServerContext` (``speculation``):
a draft device asks it for a round's k before drafting, a replica before a
fused round, and a replica settles each verified round through it. It reads
the replicas' queues and windows and books their k and token counts; it
knows nothing of routing, the network or the fleet's changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import simpy

from policies.lanes import DECODE, FUSED, VERIFY
from policies.views import KSignals, RoundOutcome
from simulator.acceptance import AcceptanceModel
from simulator.acceptance.protocol import RequestTraits
from simulator.acceptance.spread import concentration_for
from simulator.engine.binding import KControl
from simulator.engine.costs import LutStepPredictor
from simulator.engine.request_state import RequestState
from simulator.engine.target import TargetReplica
from simulator.rng import BufferedDraws, RequestUniforms

LANE_OF_MODE: Mapping[str, str] = {"none": DECODE, "fused": FUSED, "distributed": VERIFY}
"""The decode-lane work of a request by its mode."""

REQUEST_ACCEPTANCE_WEIGHT = 0.3
"""Weight of the newest round in a request's moving acceptance (``KSignals.request_acceptance``)."""


class Speculation:
    """Chooses draft lengths and settles verified rounds for one run.

    Args:
        env: The run's clock.
        replicas: The run's replicas by global index (the fleet's list: it grows in place).
        control: The k controller and what it reads.
        k_min: Smallest draft length a controller may choose.
        k_max: Largest draft length.
        temperature: Sampling temperature of the acceptance curves.
        draws: The ``acceptance`` stream's draws.
        levels: Each request's acceptance level (stream ``acceptance_levels``).
        request_spread: ``speculation.request_spread``.
    """

    def __init__(
        self,
        env: simpy.Environment,
        replicas: Sequence[TargetReplica],
        control: KControl,
        k_min: int,
        k_max: int,
        temperature: float,
        draws: BufferedDraws,
        levels: RequestUniforms,
        request_spread: str | float = "none",
    ) -> None:
        self.env = env
        self.replicas = replicas
        self.acceptance_rng = draws
        self.k_min = k_min
        self.k_max = k_max
        self.k_floor = 0 if k_min == 0 else 1
        """Smallest k a round drafts: 0 (a plain decode step) only when k_min allows it."""
        self.temperature = temperature
        self._levels = levels
        self._request_spread = request_spread
        self._predictors: dict[tuple[int, str], LutStepPredictor] = {}
        self.set_control(control)

    def set_control(self, control: KControl) -> None:
        """Choose the draft length of rounds chosen from now on with ``control``."""
        self.controller = control.controller
        self.k_default = control.k
        self._windowed = control.windowed
        self._predicts = control.predicts
        self._fixed_k: int | None = None
        """The controller's k when it reads only the bounds (``fixed_k``), asked once."""
        if control.fixed:
            bounds = KSignals(self.env._now, control.k, self.k_min, self.k_max, math.nan, 0, 0)
            self._fixed_k = int(self.controller.next_k(bounds))

    def acceptance_for(self, req: RequestState, curve: AcceptanceModel) -> AcceptanceModel:
        """The model the request's rounds draw from: ``curve`` for its category and level."""
        traits = RequestTraits(req.request_id, req.category, self._levels.at(req.request_id))
        return curve.for_request(traits, concentration_for(self._request_spread, curve.info))

    def choose_k(self, req: RequestState) -> None:
        """Ask the k controller for the request's next draft length.

        A controller whose k is fixed (``fixed_k``) was asked once: no signals
        are built for it.
        """
        target = self.replicas[req.replica]
        generated = req.generated
        k = self._fixed_k
        if k is None:
            k = self._next_k(req, target)
        # Never draft past the output: the round's bonus token is the last one.
        most = req.output_tokens - generated - 1
        if k > most:
            k = most
        if k < self.k_floor:
            k = self.k_floor
        req.k = k
        target.k_sum += k
        target.k_rounds += 1

    def _next_k(self, req: RequestState, target: TargetReplica) -> int:
        """The controller's answer to the request's signals now."""
        now = self.env._now
        k_current = req.k if req.rounds else self.k_default
        acceptance_rate = req.accepted / req.drafted if req.drafted else math.nan
        queue_len = target.waiting(LANE_OF_MODE[req.mode])
        context_len = req.prompt_tokens + req.generated
        window = target.window
        if window is None:
            signals = KSignals(
                now, k_current, self.k_min, self.k_max, acceptance_rate, queue_len, context_len
            )
        else:
            # The windowed fields too, in one record (not one per field group),
            # by position: binding fourteen keywords costs as much as the rest.
            signals = KSignals(
                now,
                k_current,
                self.k_min,
                self.k_max,
                acceptance_rate,
                queue_len,
                context_len,
                target.index,  # replica
                req.acceptance_recent,  # request_acceptance
                window.acceptance(),  # window_acceptance
                len(target.holders),  # running_batch
                window.p95_ms(),  # decode_p95_ms
                window.wait_ms(),  # queue_delay_ms
                self.predictor(target, req.mode) if self._predicts else None,  # predictor
            )
        return int(self.controller.next_k(signals))

    def predictor(self, replica: TargetReplica, mode: str) -> LutStepPredictor:
        """The replica's iteration-time predictor for a request of ``mode`` (built once)."""
        kind = LANE_OF_MODE[mode]
        key = (replica.index, kind)
        predictor = self._predictors.get(key)
        if predictor is None:
            step = replica.costs.step[kind]
            assert step is not None
            plain = replica.costs.step[DECODE] if kind == VERIFY else None
            predictor = self._predictors[key] = LutStepPredictor(step, plain)
        return predictor

    @property
    def predictors_built(self) -> int:
        """How many iteration-time predictors were built (only for controllers that read them)."""
        return len(self._predictors)

    def verify_round(self, req: RequestState) -> int:
        """Sample the accepted prefix of a round; commit the tokens; return how many.

        A round of k = 0 drafted nothing: the target decoded one token, no
        acceptance is drawn (no random number is used).
        """
        model = req.acceptance
        assert model is not None
        k = req.k
        generated = req.generated
        accepted = (
            model.sample_accepted(
                k, req.prompt_tokens + generated, self.acceptance_rng, self.temperature
            )
            if k
            else 0
        )
        gained = accepted + 1
        remaining = req.output_tokens - generated
        if gained > remaining:
            gained = remaining
        req.generated = generated + gained
        req.drafted += k
        req.accepted += accepted
        req.rounds += 1
        if self._windowed:
            window = self.replicas[req.replica].window
            assert window is not None
            window.add_round(accepted, req.k)
            self.controller.observe(
                RoundOutcome(
                    self.env._now, req.replica, req.k, accepted, gained, window.last_step_s
                )
            )
            if req.k:  # a k = 0 round says nothing about acceptance
                rate = accepted / req.k
                recent = req.acceptance_recent
                req.acceptance_recent = (
                    rate
                    if recent != recent
                    else recent + REQUEST_ACCEPTANCE_WEIGHT * (rate - recent)
                )
        self.replicas[req.replica].tokens_out += gained
        return gained
