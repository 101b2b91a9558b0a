"""The policy families and the registry of each.

A family is one kind of decision the engine delegates. Its protocol lives in
the module that implements its built-in policies; this module only names the
families so that the registries exist before any policy registers itself.
"""

from __future__ import annotations

from typing import Any

from policies.registry import PolicyRegistry, new_family

ROUTING: PolicyRegistry[Any] = new_family(
    "routing", "Assigns each admitted request to a target replica."
)
PREFILL_BATCHING: PolicyRegistry[Any] = new_family(
    "prefill_batching", "Forms prefill batches on a target replica from its prefill queue."
)
DRAFT_SCHEDULING: PolicyRegistry[Any] = new_family(
    "draft_scheduling", "Forms draft iterations on a draft device from the requests it serves."
)
VERIFY_BATCHING: PolicyRegistry[Any] = new_family(
    "verify_batching", "Forms verify (or fused / plain decode) iterations on a target replica."
)
K_CONTROL: PolicyRegistry[Any] = new_family(
    "k_control", "Chooses the draft length k of the next speculation round."
)
ADMISSION: PolicyRegistry[Any] = new_family("admission", "Admits or rejects each arriving request.")
HYBRID_MODE: PolicyRegistry[Any] = new_family(
    "hybrid_mode", "Chooses distributed or fused speculation per request in hybrid serving."
)
ARBITRATION: PolicyRegistry[Any] = new_family(
    "arbitration",
    "Chooses which lane's work forms a target replica's next iteration (whole rounds: prefill "
    "first, chunked; lane rules split fused rounds into draft and verify iterations).",
)
DRAFT_SELECTION: PolicyRegistry[Any] = new_family(
    "draft_selection",
    "Chooses, per request, which of its draft device's drafter models drafts for it.",
)
