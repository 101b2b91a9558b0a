"""Draft-length (k) controllers.

A controller instance is shared by the whole run. Controllers that adapt keep
their state per target replica, keyed by ``KSignals.replica``, in plain dicts
updated only by :meth:`KController.next_k`: the same calls in the same order
give the same ks, so runs are deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol

from policies.base import Policy
from policies.families import K_CONTROL
from policies.params import NoParams, param
from policies.views import KSignals, RoundOutcome


class KController(Policy, Protocol):
    """Chooses k for a request's next speculation round.

    Attributes:
        signal_window: How many recent decode-lane iterations and verified
            rounds of each replica the windowed signals of
            :class:`~policies.views.KSignals` cover (``decode_p95_ms``,
            ``window_acceptance``). 0 (the default): the controller reads
            none of the fields after ``context_len``, and the engine keeps
            no history. A class or instance attribute.
        predicts_iteration: With a positive ``signal_window``, the engine
            fills ``KSignals.predictor``. Default ``False``.
        fixed_k: ``next_k`` reads nothing of its signals but ``k_min`` and
            ``k_max`` (the same k every round): the engine asks it once, with
            signals holding only those bounds (the other fields at ``k_current``
            = ``speculation.k``, ``nan`` or 0), and reuses the answer, building
            no signals per round. It holds only where declared in the class
            whose ``next_k`` runs (:func:`policies.base.promised_by_method`): a
            subclass that overrides ``next_k`` is asked every round unless it
            declares it again. Default ``False``.
    """

    signal_window: int = 0
    predicts_iteration: ClassVar[bool] = False
    fixed_k: ClassVar[bool] = False

    def next_k(self, signals: KSignals) -> int:
        """Return k for the next round, within ``[signals.k_min, signals.k_max]``."""
        ...

    def observe(self, outcome: RoundOutcome) -> None:
        """Learn from a verified round (called only when ``signal_window`` is positive)."""
        ...


K_CONTROL.declare_protocol(KController)


class NoFeedback(KController):
    """Base of controllers that learn nothing from verified rounds."""

    def observe(self, outcome: RoundOutcome) -> None:
        """Ignore the round."""


def _positive_k(k: int) -> int:
    """Return ``speculation.k``, refusing one below 1."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return k


def _clip(k: int, signals: KSignals) -> int:
    if k > signals.k_max:
        return signals.k_max
    if k < signals.k_min:
        return signals.k_min
    return k


@K_CONTROL.register
class StaticK(NoFeedback):
    """The same k every round: the scenario's ``speculation.k``."""

    name: ClassVar[str] = "static"
    fixed_k: ClassVar[bool] = True

    def __init__(self, k: int, params: NoParams | None = None) -> None:
        self.k = _positive_k(k)
        self.params = params if params is not None else NoParams()

    def next_k(self, signals: KSignals) -> int:
        """Return the fixed k, clipped to the allowed range."""
        return _clip(self.k, signals)


@dataclass(frozen=True)
class BackpressureParams:
    """Parameters of :class:`Backpressure`.

    Attributes:
        high_queue: Shrink k when at least this many requests wait in the
            request's decode lane (verify, or fused steps) on its replica.
        low_queue: Grow k back when at most this many wait. With
            ``low_queue >= high_queue`` there is no dead band and shrinking wins.
        step: How much k changes per decision.
    """

    high_queue: int = param(8, minimum=1)
    low_queue: int = param(2, minimum=0)
    step: int = param(1, minimum=1)


@K_CONTROL.register
class Backpressure(NoFeedback):
    """Shrinks k while the replica's verify queue is deep, grows it back with headroom.

    Each replica has its own k, starting at ``speculation.k``; every round a
    request starts on the replica moves it by ``step`` (see the README).
    """

    name: ClassVar[str] = "backpressure"
    Params = BackpressureParams
    signal_window = 1

    def __init__(self, k: int, params: BackpressureParams | None = None) -> None:
        self.start = _positive_k(k)
        self.params = params if params is not None else BackpressureParams()
        self._k_by_replica: dict[int, int] = {}

    def next_k(self, signals: KSignals) -> int:
        """Move the replica's k one step against the queue depth; return it."""
        params = self.params
        k = self._k_by_replica.get(signals.replica, self.start)
        queue = signals.verify_queue_len
        if queue >= params.high_queue:
            k -= params.step
        elif queue <= params.low_queue:
            k += params.step
        k = _clip(k, signals)
        self._k_by_replica[signals.replica] = k
        return k


@dataclass(frozen=True)
class BatchThresholdParams:
    """Parameters of :class:`BatchThreshold`.

    Attributes:
        max_running: Speculate with ``speculation.k`` while fewer requests than
            this run on the replica; from this many on, draft ``k_min``.
    """

    max_running: int = param(32, minimum=1)


@K_CONTROL.register
class BatchThreshold(NoFeedback):
    """Full speculation below a running-batch size, minimal above it (vLLM's dynamic rule).

    vLLM turns speculation off (k = 0) past the threshold; this version drafts
    ``k_min``, which does the same with ``k_min: 0`` (mode distributed).
    """

    name: ClassVar[str] = "batch_threshold"
    Params = BatchThresholdParams
    signal_window = 1

    def __init__(self, k: int, params: BatchThresholdParams | None = None) -> None:
        self.k = _positive_k(k)
        self.params = params if params is not None else BatchThresholdParams()

    def next_k(self, signals: KSignals) -> int:
        """Return ``speculation.k`` below the threshold, ``k_min`` from it on."""
        if signals.running_batch < self.params.max_running:
            return _clip(self.k, signals)
        return signals.k_min


@dataclass(frozen=True)
class AcceptanceFeedbackParams:
    """Parameters of :class:`AcceptanceFeedback`.

    Attributes:
        every_rounds: N: a replica's k is reconsidered once per this many
            rounds started on it.
        window: M: the verified rounds (acceptance) and decode-lane iterations
            (p95 latency) of the replica the decision looks back over.
        queue_high: Shrink when more requests than this wait in the lane.
        queue_low: Growing needs fewer than this waiting.
        p95_high_ms: Shrink when the decode-lane p95 latency exceeds this.
        p95_low_ms: Growing needs the p95 below this.
        acceptance_low: Shrink when the window's acceptance is below this.
        acceptance_high: Growing needs the acceptance above this.
        step: How much k changes per decision.
    """

    every_rounds: int = param(8, minimum=1)
    window: int = param(32, minimum=1)
    queue_high: int = param(10, minimum=0)
    queue_low: int = param(1, minimum=0)
    p95_high_ms: float = param(50.0, exclusive_minimum=0)
    p95_low_ms: float = param(45.0, exclusive_minimum=0)
    acceptance_low: float = param(0.35, minimum=0, maximum=1)
    acceptance_high: float = param(0.65, minimum=0, maximum=1)
    step: int = param(1, minimum=1)


@K_CONTROL.register
class AcceptanceFeedback(NoFeedback):
    """Verify-PD's draft-length loop: back off under load or poor acceptance, grow when clear.

    Each replica has its own k, starting at ``speculation.k`` (see the README
    for the rule). Signals not yet measured (``nan``) neither shrink nor allow
    growing.
    """

    name: ClassVar[str] = "acceptance_feedback"
    Params = AcceptanceFeedbackParams

    def __init__(self, k: int, params: AcceptanceFeedbackParams | None = None) -> None:
        self.start = _positive_k(k)
        self.params = params if params is not None else AcceptanceFeedbackParams()
        self.signal_window = self.params.window
        self._k_by_replica: dict[int, int] = {}
        self._rounds_by_replica: dict[int, int] = {}

    def next_k(self, signals: KSignals) -> int:
        """Count the round; every N-th, move the replica's k by the thresholds; return it."""
        params = self.params
        replica = signals.replica
        k = self._k_by_replica.get(replica, self.start)
        rounds = self._rounds_by_replica.get(replica, 0) + 1
        if rounds >= params.every_rounds:
            rounds = 0
            queue = signals.verify_queue_len
            p95_ms = signals.decode_p95_ms
            acceptance = signals.window_acceptance
            if (
                queue > params.queue_high
                or p95_ms > params.p95_high_ms
                or acceptance < params.acceptance_low
            ):
                k -= params.step
            elif (
                queue < params.queue_low
                and p95_ms < params.p95_low_ms
                and acceptance > params.acceptance_high
            ):
                k += params.step
        self._rounds_by_replica[replica] = rounds
        k = _clip(k, signals)
        self._k_by_replica[replica] = k
        return k


@dataclass(frozen=True)
class PidParams:
    """Parameters of :class:`Pid`.

    Attributes:
        delay_target_ms: Set point of the replica's queue delay
            (``KSignals.queue_delay_ms``).
        kp: Proportional gain: k per unit of relative error.
        ki: Integral gain: k per unit of relative error summed over decisions.
        kd: Derivative gain: k per unit change of the relative error between
            decisions.
        every_rounds: A replica's k is recomputed once per this many rounds
            started on it.
        window: Speculative steps' requests the queue delay is averaged over.
    """

    delay_target_ms: float = param(20.0, exclusive_minimum=0)
    kp: float = param(1.0, minimum=0)
    ki: float = param(0.2, minimum=0)
    kd: float = param(0.0, minimum=0)
    every_rounds: int = param(8, minimum=1)
    window: int = param(32, minimum=1)


class _PidState:
    """One replica's controller state."""

    __slots__ = ("integral", "k", "last_error", "rounds")

    def __init__(self, k: int) -> None:
        self.k = k
        self.rounds = 0
        self.integral = 0.0
        self.last_error = math.nan


@K_CONTROL.register
class Pid(NoFeedback):
    """Tracks a queue-delay set point: k grows with headroom below it, shrinks above it.

    Each replica has its own loop; the output is ``speculation.k`` plus the
    PID term, rounded half up and clipped to ``[k_min, k_max]`` (see the README).
    """

    name: ClassVar[str] = "pid"
    Params = PidParams

    def __init__(self, k: int, params: PidParams | None = None) -> None:
        self.start = _positive_k(k)
        self.params = params if params is not None else PidParams()
        self.signal_window = self.params.window
        self._states: dict[int, _PidState] = {}

    def next_k(self, signals: KSignals) -> int:
        """Count the round; every N-th, recompute the replica's k from the delay error."""
        params = self.params
        state = self._states.get(signals.replica)
        if state is None:
            state = self._states[signals.replica] = _PidState(_clip(self.start, signals))
        state.rounds += 1
        delay_ms = signals.queue_delay_ms
        if state.rounds >= params.every_rounds and delay_ms == delay_ms:
            state.rounds = 0
            error = (params.delay_target_ms - delay_ms) / params.delay_target_ms
            change = 0.0 if state.last_error != state.last_error else error - state.last_error
            state.last_error = error
            integral = state.integral + error
            output = self.start + params.kp * error + params.ki * integral + params.kd * change
            if signals.k_min <= output <= signals.k_max:
                state.integral = integral  # integrate only while unsaturated (no windup)
            state.k = _clip(math.floor(output + 0.5), signals)
        return state.k


@dataclass(frozen=True)
class BanditParams:
    """Parameters of :class:`Bandit`.

    Attributes:
        exploration: Weight of UCB1's confidence term, relative to the best
            arm's mean reward.
    """

    exploration: float = param(0.5, minimum=0)


class _Arms:
    """One replica's reward statistics, one arm per k."""

    __slots__ = ("counts", "plays", "sums")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.sums: dict[int, float] = {}
        self.plays = 0


@K_CONTROL.register
class Bandit(NoFeedback):
    """UCB1 over k in ``[k_min, k_max]``; reward: committed tokens per target millisecond.

    Each replica learns on its own from the rounds it verifies. Untried ks are
    played first, smallest first; then the k maximising mean reward plus
    ``exploration * best_mean * sqrt(2 ln(rounds) / plays of k)`` (ties: the
    smaller k). No randomness is involved.
    """

    name: ClassVar[str] = "bandit"
    Params = BanditParams
    signal_window = 1

    def __init__(self, k: int, params: BanditParams | None = None) -> None:
        _positive_k(k)
        self.params = params if params is not None else BanditParams()
        self._arms: dict[int, _Arms] = {}

    def next_k(self, signals: KSignals) -> int:
        """Pick the replica's k by UCB1."""
        arms = self._arms.get(signals.replica)
        if arms is None:
            arms = self._arms[signals.replica] = _Arms()
        counts = arms.counts
        for k in range(signals.k_min, signals.k_max + 1):
            if k not in counts:
                return k
        means = {k: arms.sums[k] / counts[k] for k in range(signals.k_min, signals.k_max + 1)}
        scale = self.params.exploration * max(means.values())
        log_plays = math.log(arms.plays)
        best_k, best = signals.k_min, -math.inf
        for k, mean in means.items():
            score = mean + scale * math.sqrt(2.0 * log_plays / counts[k])
            if score > best:
                best_k, best = k, score
        return best_k

    def observe(self, outcome: RoundOutcome) -> None:
        """Credit the round's reward to its k on its replica."""
        if not outcome.target_s > 0.0:
            return
        arms = self._arms.get(outcome.replica)
        if arms is None:
            arms = self._arms[outcome.replica] = _Arms()
        reward = outcome.gained / (outcome.target_s * 1000.0)
        k = outcome.k
        arms.counts[k] = arms.counts.get(k, 0) + 1
        arms.sums[k] = arms.sums.get(k, 0.0) + reward
        arms.plays += 1


@dataclass(frozen=True)
class GoodputParams:
    """Parameters of :class:`Goodput`.

    Attributes:
        prior_acceptance: Per-token acceptance assumed before the request and
            its replica have verified any round (and while the replica's
            window holds only k = 0 rounds).
        window: Verified rounds of the replica whose acceptance stands in for
            a request that has none of its own yet (``window_acceptance``).
    """

    prior_acceptance: float = param(0.56, minimum=0, maximum=1)
    """Spec-Bench's SpS on Vicuna-7B (``acceptance/sps_vicuna-7b.yaml``, 0.5614), rounded."""
    window: int = param(32, minimum=1)
    """The window of ``acceptance_feedback`` and ``pid``."""


def expected_tokens(k: int, alpha: float) -> float:
    """Expected tokens a round of ``k`` drafts commits at per-token acceptance ``alpha``.

    ``(1 - alpha^(k+1)) / (1 - alpha)`` (Leviathan et al. 2023, eq. 1): the
    accepted prefix plus the target's own token; ``k + 1`` at ``alpha = 1``.
    """
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


@K_CONTROL.register
class Goodput(NoFeedback):
    """SmartSpec's rule: the k maximising expected committed tokens per predicted iteration time.

    For the request's acceptance estimate α and the replica's running batch B,
    returns the k in ``[k_min, k_max]`` maximising
    ``B * expected_tokens(k, α) / T(B, k, context)``, with T the replica's
    LUT-predicted iteration time (``KSignals.predictor``); ties go to the
    smaller k. With ``k_min: 0`` (mode distributed) it turns speculation off
    when drafting does not pay for its verify cost. See the README.

    Reference: X. Liu et al., "Optimizing Speculative Decoding for Serving
    Large Language Models Using Goodput", 2024 (SmartSpec).
    """

    name: ClassVar[str] = "goodput"
    Params = GoodputParams
    predicts_iteration: ClassVar[bool] = True

    def __init__(self, k: int, params: GoodputParams | None = None) -> None:
        _positive_k(k)
        self.params = params if params is not None else GoodputParams()
        self.signal_window = self.params.window

    def acceptance(self, signals: KSignals) -> float:
        """The request's acceptance estimate: its own EWMA, else the replica's window, else the prior."""
        alpha = signals.request_acceptance
        if alpha != alpha:
            alpha = signals.window_acceptance
            if alpha != alpha:
                alpha = self.params.prior_acceptance
        return alpha

    def next_k(self, signals: KSignals) -> int:
        """Return the goodput-maximising k (the smallest of equals)."""
        predictor = signals.predictor
        assert predictor is not None  # the engine fills it: predicts_iteration is set
        alpha = self.acceptance(signals)
        batch = max(1, signals.running_batch)
        context = signals.context_len
        best_k, best = signals.k_min, -math.inf
        for k in range(signals.k_min, signals.k_max + 1):
            step_s = predictor.step_s(batch, k, context)
            if not step_s > 0.0:
                continue
            goodput = batch * expected_tokens(k, alpha) / step_s
            if goodput > best:
                best_k, best = k, goodput
        return best_k
