"""A fused round that drafts a token tree, priced from the head's and the target's LUTs.

EAGLE-2's dynamic tree, Medusa's static trees and SGLang's
``speculative_num_draft_tokens`` draft a tree instead of a chain: ``depth``
head passes, each over ``width`` candidates per sequence, then one target
pass verifying the tree's ``nodes`` tokens per sequence under a tree mask.
:class:`TreeRoundCost` prices such a round for ``n`` sequences at context
``c`` as

``sum_{l=0}^{depth-1} level(c + l, n) + verify(target, c, n, fanout_k = nodes - 1)``

where a level is the head file's ``verify`` row at ``fanout_k = width - 1``
(one head step over ``width`` candidates per sequence, ``lut/README.md``) or,
at width 1, its ``draft_decode`` row. All of it is GPU time; the replica's
engine profile is applied once to the whole round (one step with ``depth``
head passes and one target pass, :class:`~simulator.engine.step_pricing.TreeShape`).

The class is a :class:`~simulator.engine.costs.PhaseCost`, so context curves,
fused runs and iteration predictors use it unchanged; its ``key`` is the
fused model's ``fused_decode`` key (what the replica's rounds are reported
under), whose rows it does not read.
"""

from __future__ import annotations

from simulator.engine.costs import IterationCost, PhaseCost
from simulator.engine.step_pricing import StepPricer, TreeShape
from simulator.lut import LutKey, LutManager, OutOfRange


class TreeRoundCost(PhaseCost):
    """Iteration costs of a token-tree fused round (see the module docstring).

    Args:
        manager: The LUT manager (holding the head's and the target's rows).
        key: The fused model's ``fused_decode`` key (the replica's rounds).
        out_of_range: The out-of-range rule of lookups.
        pricer: The replica's engine pricing of the whole round (its ``tree``
            set), or ``None`` (the summed GPU time is the step).
        head_key: The head's ``verify`` key (width > 1) or ``draft_decode`` key
            (width 1), on the whole replica.
        verify_key: The target's ``verify`` key on the whole replica.
        tree: The tree's shape.
    """

    def __init__(
        self,
        manager: LutManager,
        key: LutKey,
        out_of_range: OutOfRange,
        pricer: StepPricer | None,
        head_key: LutKey,
        verify_key: LutKey,
        tree: TreeShape,
    ) -> None:
        self.head_key = head_key
        self.verify_key = verify_key
        self.tree = tree
        super().__init__(manager, key, out_of_range, pricer)
        self.context_axis = _round_axis(
            manager.grid(verify_key)[0], manager.grid(head_key)[0], tree.depth
        )

    def gpu_lookup(self, context: float, microbatch: float, fanout_k: int) -> IterationCost:
        """Return the GPU work of one round: every head level plus the tree verify.

        ``fanout_k`` is the round's draft length, which is the tree's depth
        (the scenario requires ``speculation.k`` to equal it); the tree's own
        shape prices the round.
        """
        pricer = self.pricer
        rows = microbatch if pricer is None else pricer.lut_microbatch(microbatch)
        tree = self.tree
        lookup = self.manager.lookup
        head_k = tree.width - 1 if tree.width > 1 else 1
        latency_ms = 0.0
        energy_mj = 0.0
        for level in range(tree.depth):
            part = lookup(self.head_key, context + level, rows, head_k, self.out_of_range)
            latency_ms += part.latency_ms
            energy_mj += part.energy_mj
        verify = lookup(self.verify_key, context, rows, tree.nodes - 1, self.out_of_range)
        latency_ms += verify.latency_ms
        energy_mj += verify.energy_mj
        return IterationCost(latency_ms / 1000.0, energy_mj / 1000.0)


def _round_axis(
    verify_axis: tuple[int, ...], head_axis: tuple[int, ...], depth: int
) -> tuple[float, ...]:
    """The contexts at which a round is priced: the target's grid where every level fits.

    Level ``l`` of a round at context ``c`` reads the head's rows at ``c + l``,
    so the round's grid ends ``depth - 1`` tokens before the head's (with that
    end as its last point); like a fused LUT's rounds, the round is linear in
    context between these points.
    """
    lo = float(max(verify_axis[0], head_axis[0]))
    hi = float(min(verify_axis[-1], head_axis[-1] - (depth - 1)))
    inside = [float(x) for x in verify_axis if lo <= x <= hi]
    if not inside or inside[-1] < hi:
        inside.append(hi)
    return tuple(inside)
