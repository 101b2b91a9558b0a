"""Splitting one decode-lane iteration's batch into microbatches, and pricing it.

The verify lane's ``microbatch`` settings decide how the requests of one
iteration are grouped: requests are ordered by context length (shortest
first) and cut into consecutive groups of at most ``max_microbatch``; with
``fallback: per_request`` a group also ends where the next request's context
is more than ``max_context_ratio`` times the group's shortest, so a request
whose context diverges from every other runs on its own (per-request
attention). Each group is priced by the LUT at its own size, mean context
and largest k, and the groups run one after the other: the iteration's
latency and energy are their sums. A batch that forms one group is priced
exactly as before (one lookup at the batch's context). A group's context is
its mean, or with ``simulation.ragged_batches: tail_weighted`` the effective
context of :mod:`simulator.engine.ragged`.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.engine.costs import PhaseCost
from simulator.engine.ragged import batch_context
from simulator.engine.request_state import RequestState
from simulator.scenario.model import MicrobatchSpec


class Microbatcher:
    """Groups and prices decode-lane batches (see the module docstring)."""

    __slots__ = ("_max", "_ratio", "whole_batches")

    def __init__(self, spec: MicrobatchSpec, max_batch: int) -> None:
        self._max = spec.max_microbatch
        self._ratio = spec.max_context_ratio if spec.fallback == "per_request" else None
        self.whole_batches = self._ratio is None and self._max >= max_batch
        """Every batch of at most ``max_batch`` is one microbatch (callers may skip grouping)."""

    def groups_once(self, batch: Sequence[RequestState]) -> bool:
        """Whether ``batch`` forms a single microbatch."""
        return self._one_group(batch)

    def _one_group(self, batch: Sequence[RequestState]) -> bool:
        if len(batch) > self._max:
            return False
        ratio = self._ratio
        if ratio is None or len(batch) == 1:
            return True
        contexts = [req.context for req in batch]
        return max(contexts) <= ratio * min(contexts)

    def groups(self, batch: Sequence[RequestState]) -> list[list[RequestState]]:
        """Return the microbatches of ``batch``, shortest contexts first."""
        if self._one_group(batch):
            return [list(batch)]
        ordered = sorted(batch, key=lambda req: req.context)
        out: list[list[RequestState]] = []
        group: list[RequestState] = []
        ratio = self._ratio
        for req in ordered:
            if group and (
                len(group) == self._max
                or (ratio is not None and req.context > ratio * group[0].context)
            ):
                out.append(group)
                group = []
            group.append(req)
        out.append(group)
        return out

    def price(
        self,
        cost: PhaseCost,
        batch: Sequence[RequestState],
        fanout: bool,
        plain: PhaseCost | None = None,
        tail_weight: float = 0.0,
    ) -> tuple[float, float, int]:
        """Return ``(latency_s, energy_j, microbatches)`` of one iteration of ``batch``.

        ``fanout``: price each group at its largest ``k`` (verify and fused
        work); otherwise at k = 1 (plain decode). A group whose requests all
        draft k = 0 is a plain decode step, priced by ``plain``. Each group is
        priced at :func:`~simulator.engine.ragged.batch_context` with
        ``tail_weight`` (0: its mean context).
        """
        if self._one_group(batch):
            groups: list[list[RequestState]] = [list(batch)]
        else:
            groups = self.groups(batch)
        latency_s = 0.0
        energy_j = 0.0
        for group in groups:
            n = len(group)
            k = max(req.k for req in group) if fanout else 1
            group_cost = cost
            if k == 0:
                assert plain is not None  # k = 0 is allowed only where plain decode is priced
                group_cost, k = plain, 1
            lat, energy = group_cost.at(batch_context(group, tail_weight), n, k)
            latency_s += lat
            energy_j += energy
        return latency_s, energy_j, len(groups)
