"""The names a target replica and its arbitration rules share: lanes and kinds of work.

One vocabulary, declared once, that both sides import: :mod:`policies.arbitration`
(rules ask a replica about its lanes by these names) and the engine
(:mod:`simulator.engine.target` and its mechanisms, :mod:`simulator.engine.costs`,
:mod:`simulator.engine.split_rounds`). It lives here, beside the policy
Protocols, because policies may not import the engine while the engine
already imports the policies' contracts (:mod:`policies.views`); it imports
nothing.

The names are plain ``str`` constants, not ``enum`` members: they reach
outputs verbatim (trace event names such as ``verify_start`` and
``lane_draft_start``, span kinds) and key the per-kind tables read on every
iteration, so they must format, hash and compare exactly as the strings did.

Lanes of a replica (what :meth:`~policies.arbitration.ReplicaLanes.queue_length`
and friends take):

- :data:`PREFILL_LANE`: prompts waiting for their prefill.
- :data:`DECODE_LANE`: decode-lane work (plain decode, verify bundles, fused
  rounds; draft iterations and atomic rounds under lane rules).
- :data:`VERIFY_LANE`: verify iterations of split fused rounds.

Kinds of decode-lane work (what a request runs after its prefill; also the
keys of a replica's per-kind costs and KV per token):

- :data:`DECODE`: plain decode iterations (mode ``none``).
- :data:`VERIFY`: verify a client's draft bundle (mode ``distributed``).
- :data:`FUSED`: the target drafts and verifies itself (mode ``fused``).

Kinds of split iterations under a lane rule (see :mod:`simulator.engine.split_rounds`):
:data:`PREFILL_PASS`, :data:`DRAFT_PASS`, :data:`VERIFY_PASS`, :data:`ROUND`,
each on the lane :data:`LANE_OF_PASS` gives.
"""

from __future__ import annotations

from typing import Final

PREFILL_LANE: Final = "prefill"
"""The prefill lane: prompts waiting for their prefill."""
DECODE_LANE: Final = "decode"
"""The decode lane: decode-lane work, draft iterations and atomic rounds."""
VERIFY_LANE: Final = "verify"
"""The verify lane of split rounds: drafts waiting for their verify."""
LANES: Final = (PREFILL_LANE, DECODE_LANE, VERIFY_LANE)
"""Every lane of a replica."""

DECODE: Final = "decode"
"""Decode-lane work of a request served without speculation: plain decode iterations."""
VERIFY: Final = "verify"
"""Decode-lane work of a distributed request: verify its client's draft bundles."""
FUSED: Final = "fused"
"""Decode-lane work of a fused request: the target drafts and verifies itself."""
WORK_KINDS: Final = (DECODE, VERIFY, FUSED)
"""Every kind of decode-lane work, in the order a replica looks at its queues."""

PREFILL_PASS: Final = "prefill"
"""A split iteration prefilling a batch of prompts on both models."""
DRAFT_PASS: Final = "draft"
"""A split iteration running the draft model's ``k`` decode steps for a batch."""
VERIFY_PASS: Final = "verify"
"""A split iteration running the target's verify pass over a batch's drafts."""
ROUND: Final = "round"
"""A split iteration running one request's draft and verify as one (an atomic round)."""
LANE_OF_PASS: Final = {
    PREFILL_PASS: PREFILL_LANE,
    DRAFT_PASS: DECODE_LANE,
    ROUND: DECODE_LANE,
    VERIFY_PASS: VERIFY_LANE,
}
"""The lane each kind of split iteration runs on."""
