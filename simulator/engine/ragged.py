"""The context a decode-lane batch of sequences with different contexts is priced at.

A LUT row prices ``n`` sequences that all have one context. In a served batch
(continuous batching) the contexts differ, and variable-length attention runs
one block per sequence and head: the KV read is the same as at the mean
context, but the blocks of the longest sequences finish last and set the
kernel's tail. Measured on an H100 serving loop, a plain decode step of 5-32
ragged sequences costs a median 1.055x the uniform price at its mean context
and 0.944x the price at its longest (``lut_population/serving_loop.py``,
``docs/step_timing.md``), so the batch is priced at an effective context
between the two::

    c_eff = mean + w * (max - mean)

``w`` (``simulation.ragged_batches: tail_weighted``) is fitted per kind of
step: to the plain decode steps for plain decode (and split rounds' draft
steps), to the fused rounds for verify and fused rounds; each fit is checked
on the other kind. ``mean`` (w = 0) prices at the mean context. A batch of one sequence, or of equal contexts, is priced at its
context either way. The contexts of a plain decode run all grow by one per
iteration, so ``max - mean`` stays constant and a run's effective context
grows by one per iteration as its mean does.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.engine.request_state import RequestState


def batch_context(batch: Sequence[RequestState], tail_weight: float) -> float:
    """Context ``batch`` is priced at: ``mean + tail_weight * (max - mean)``."""
    n = len(batch)
    if n == 1:
        return float(batch[0].context)
    total = 0
    longest = 0
    for req in batch:
        context = req.prompt_tokens + req.generated  # req.context, without the property call
        total += context
        if context > longest:
            longest = context
    mean = total / n
    if tail_weight == 0.0:
        return mean
    return mean + tail_weight * (longest - mean)
