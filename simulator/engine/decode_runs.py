"""Plain decode iterations of a target replica, a run of them with an unchanged batch in one event.

Runs of plain decode iterations whose batch does not change are advanced in
one event (see ``simulation.fuse_iterations``): only when the batch is the
whole decode queue and forms one microbatch, ending at the first finish, at
the iteration that would start throttled or after the replica becomes
unavailable, or where KV runs out; the iteration boundaries are computed
exactly as stepping would, and a prompt that arrives (or a prefill batch
that becomes due) while a slot is free cuts the run at the next boundary.

:class:`DecodeRuns` owns the run under way; it commits decode tokens for
mixed iterations (:mod:`simulator.engine.mixed`) too.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import partial

from policies.lanes import DECODE
from simulator.engine.clock import DECISION, call_at
from simulator.engine.costs import PhaseCost
from simulator.engine.ragged import batch_context
from simulator.engine.replica_kv import ReplicaKv
from simulator.engine.replica_view import ReplicaView
from simulator.engine.request_state import RequestState
from simulator.engine.tracing import Span

NOISE_KIND = "decode"
"""The step-time dispersion plain decode iterations draw with (``simulation.step_noise``)."""


def noisy_totals(totals_s: list[float], factors: list[float]) -> list[float]:
    """Running totals of iterations whose latencies are each scaled by their factor."""
    out: list[float] = []
    previous = 0.0
    t = 0.0
    for total, factor in zip(totals_s, factors, strict=True):
        t += (total - previous) * factor
        previous = total
        out.append(t)
    return out


class DecodeRun:
    """A run of plain decode iterations over an unchanged batch.

    Attributes:
        batch: The requests decoded.
        start_s: When the run started.
        boundaries_s: End time of each iteration of the run.
        energies_j: Energy used up to the end of each iteration.
        planned: Iterations the run will complete (fewer once it is cut).
    """

    __slots__ = ("batch", "boundaries_s", "energies_j", "planned", "start_s")

    def __init__(
        self,
        batch: list[RequestState],
        start_s: float,
        boundaries_s: list[float],
        energies_j: list[float],
    ) -> None:
        self.batch = batch
        self.start_s = start_s
        self.boundaries_s = boundaries_s
        self.energies_j = energies_j
        self.planned = len(boundaries_s)


class DecodeRuns:
    """Starts, cuts and ends a replica's plain decode runs (see the module docstring).

    Args:
        replica: The replica whose decode lane runs them.
        kv: Its KV policy.

    Attributes:
        run: The run under way (``None``: none).
    """

    def __init__(self, replica: ReplicaView, kv: ReplicaKv) -> None:
        self.replica = replica
        self.kv = kv
        self.run: DecodeRun | None = None

    def start(self, batch: list[RequestState]) -> None:
        """Plain decode iterations; a run of them with an unchanged batch in one event."""
        replica = self.replica
        start = replica.env._now
        cost = replica.costs.step[DECODE]
        assert cost is not None
        per_token = replica.kv_mb_per_token[DECODE]
        grows = self.kv.grows
        if grows:
            batch = self.kv.make_room(batch, DECODE, lambda members: len(members) * per_token)
            if not batch:
                return
        n = len(batch)
        run = self._plan(batch, start, cost)
        if grows and per_token > 0:
            fits = int(self.kv.pool.free_mb // (n * per_token))
            if fits < run.planned:
                run.planned = fits
        self.run = run
        replica.busy = True
        self._schedule_end(run)

    def _plan(self, batch: list[RequestState], start: float, cost: PhaseCost) -> DecodeRun:
        """Price the decode run starting now: one iteration, or a fused run of them.

        A run is fused only when stepping would run the same batch again at
        every boundary: the batch is the whole decode queue and one
        microbatch. It ends at the first finish, before an iteration that
        would start throttled or after the replica becomes unavailable. Not
        on a decode replica whose KV grows (``ReplicaKv.promises``): KV
        hand-overs reserve there while it iterates, so each iteration makes
        its own room.
        """
        replica = self.replica
        microbatcher = replica.microbatcher
        n = len(batch)
        fuse = (
            replica.context.fuse_iterations
            and not self.kv.promises
            and not replica.chunking
            and n == len(replica.decode_q[DECODE])
            and (microbatcher.whole_batches or microbatcher.groups_once(batch))
        )
        heat = replica.heat
        factor = heat.fixed_factor if heat.constant else heat.factor(start)
        noise = replica.noise
        if not fuse:
            latency_s, energy_j, _groups = microbatcher.price(
                cost, batch, False, tail_weight=replica.tail_weight[DECODE]
            )
            if noise is not None:
                latency_s *= noise.peek(NOISE_KIND, 1)[0]
            return DecodeRun(batch, start, [start + latency_s / factor], [energy_j / factor])
        iterations = min([req.output_tokens - req.generated for req in batch])  # remaining
        # Every context grows by one per iteration: so does the batch's priced context.
        context = batch_context(batch, replica.tail_weight[DECODE])
        elapsed_s, energies = cost.curve(n, 1).cumulative_steps(context, iterations)
        if noise is not None:
            elapsed_s = noisy_totals(elapsed_s, noise.peek(NOISE_KIND, iterations))
        if factor != 1.0:
            elapsed_s = [e / factor for e in elapsed_s]
            energies = [e / factor for e in energies]
        elif not heat.constant:
            iterations = heat.cool_steps(start, elapsed_s)
        if not replica.always_available and replica.availability is not None:
            closes_in_s = replica.availability.next_unavailable_s(start) - start
            # Iterations starting before the window closes still run.
            iterations = min(iterations, 1 + bisect_left(elapsed_s, closes_in_s))
        if iterations < len(elapsed_s):
            elapsed_s = elapsed_s[:iterations]
            energies = energies[:iterations]
        return DecodeRun(batch, start, [start + e for e in elapsed_s], energies)

    def _schedule_end(self, run: DecodeRun) -> None:
        planned = run.planned
        call_at(
            self.replica.env,
            run.boundaries_s[planned - 1],
            partial(self._end, run, planned),
            DECISION,
        )

    def cut(self) -> None:
        """End the decode run at its next iteration boundary (work is waiting)."""
        run = self.run
        assert run is not None
        done = min(run.planned, bisect_left(run.boundaries_s, self.replica.env._now) + 1)
        if done < run.planned:
            run.planned = done
            self._schedule_end(run)

    def settle_at_cut(self) -> None:
        """Count the iterations of the run under way that ended before now (the run's cut).

        A run stopped by ``simulation.until_s`` reports what stepping would
        have: the iterations that ended before the cut are accounted and
        their tokens committed (none of them finishes a request: a run ends
        at its first finish); the iteration under way is not.
        """
        run = self.run
        if run is None:
            return
        done = bisect_left(run.boundaries_s, self.replica.env._now)
        if done == 0:
            return
        self.run = None
        self._account(run, done)
        self.apply(run.batch, done)
        self._backdate_growth(run, done)

    def _end(self, run: DecodeRun, done: int) -> None:
        if run is not self.run or done != run.planned:
            return  # the run was cut: an earlier end replaced this one
        self.run = None
        self._account(run, done)
        self.apply(run.batch, done)
        self._backdate_growth(run, done)
        self.replica.end_iteration()

    def _backdate_growth(self, run: DecodeRun, done: int) -> None:
        """Count the KV occupancy of the tokens the run's iterations made before now.

        :meth:`apply` grows the batch's KV (``preempt_recompute``) by all
        ``done`` tokens now; stepping grows it by one token at the end of
        each iteration, so ``kv_occupancy_mean`` gets the difference.
        """
        if not self.kv.grows or done < 1:
            return
        per_token_mb = self.replica.kv_mb_per_token[DECODE] * len(run.batch)
        now = self.replica.env._now
        held_s = sum(now - end_s for end_s in run.boundaries_s[:done])
        if held_s > 0:
            self.kv.pool.add_area(per_token_mb * held_s)

    def _account(self, run: DecodeRun, done: int) -> None:
        """Book the first ``done`` iterations of ``run``: busy time, energy, heat, trace."""
        replica = self.replica
        if replica.noise is not None:
            replica.noise.advance(done)  # the draws its iterations used
        batch = run.batch
        n = len(batch)
        energy_j = run.energies_j[done - 1]
        elapsed_s = run.boundaries_s[done - 1] - run.start_s
        heat = replica.heat
        if not heat.constant:
            heat.book(run.start_s, elapsed_s)
        replica.account_run(elapsed_s, energy_j, done, batch)
        window = replica.window
        if window is not None:
            boundaries = run.boundaries_s
            for i in range(max(0, done - window.size), done):
                window.add_iteration(boundaries[i] - (boundaries[i - 1] if i else run.start_s))
        context = replica.context
        if context.tracing:
            context.tracer.event(
                replica.env._now, "decode", f"replica {replica.index}", f"n={n} iterations={done}"
            )
            context.tracer.span(
                Span(
                    "replica",
                    f"{replica.pool}/{replica.index}",
                    "decode",
                    DECODE,
                    run.start_s,
                    elapsed_s,
                    tuple(req.request_id for req in batch),
                    n * done,
                    0,
                    done,
                )
            )

    def apply(self, batch: list[RequestState], done: int) -> None:
        """Commit ``done`` plain decode tokens to each request; finish the ones that are done."""
        replica = self.replica
        per_token = replica.kv_mb_per_token[DECODE]
        grow = self.kv.grows
        now = replica.env._now
        replica.tokens_out += done * len(batch)
        for req in batch:
            req.generated += done
            req.ready_s = now
            if grow:
                self.kv.grow(req, done * per_token, now)
        finished = [req for req in batch if req.output_tokens <= req.generated]  # remaining <= 0
        if finished:
            queue = replica.decode_q[DECODE]
            gone = {id(req) for req in finished}
            replica.decode_q[DECODE] = [req for req in queue if id(req) not in gone]
            release = self.kv.release
            lifecycle = replica.lifecycle
            for req in finished:
                release(req)
                lifecycle.on_finished_server(req, now)
