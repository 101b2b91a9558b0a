"""Per-request choice among the drafter models of a draft device.

A draft class may list several drafter models under
``hardware_profiles[].model``; for each distributed request the engine asks
the ``scheduler.draft.model_selection`` policy which of them drafts for it,
once, when the request is admitted. The engine computes every prediction the
policy sees (from the models' LUTs and acceptance curves); the policy only
compares them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from policies.base import Policy
from policies.families import DRAFT_SELECTION
from policies.params import param
from policies.views import DraftCandidate, DraftModelQuery


class DraftSelectionPolicy(Policy, Protocol):
    """Picks the drafter model of one request (no capabilities beyond :class:`Policy`'s)."""

    def choose(self, query: DraftModelQuery) -> int:
        """Return the index (into ``query.candidates``) of the model to draft with."""
        ...


DRAFT_SELECTION.declare_protocol(DraftSelectionPolicy)


@dataclass(frozen=True)
class FirstParams:
    """:class:`First` has no parameters."""


@DRAFT_SELECTION.register
class First(DraftSelectionPolicy):
    """The first candidate: the first listed model that can serve the request.

    With a single model per class this is the only behaviour there is; with a
    list it is the default (the list's order is the preference order).
    """

    name: ClassVar[str] = "first"
    Params = FirstParams

    def __init__(self, params: FirstParams) -> None:
        self.params = params

    def choose(self, query: DraftModelQuery) -> int:
        """Return 0."""
        return 0


@dataclass(frozen=True)
class AcceptanceSpeedParams:
    """:class:`AcceptanceSpeed` has no parameters."""


def tokens_per_second(candidate: DraftCandidate, k: int, verify_step_s: float) -> float:
    """Predicted committed tokens per second of draft + verify time with ``candidate``.

    ``expected_tokens / (k * draft_step_s + verify_step_s)``: the tokens one
    round commits (Leviathan et al. 2023, eq. 1 for an iid curve) over the
    time the round spends drafting ``k`` tokens and verifying them.
    """
    time_s = k * candidate.draft_step_s + verify_step_s
    return candidate.expected_tokens / time_s if time_s > 0 else float("inf")


@DRAFT_SELECTION.register
class AcceptanceSpeed(DraftSelectionPolicy):
    """The candidate with the most predicted tokens per second of draft + verify time.

    Score of a model: ``E[A + 1] / (k × t_draft + t_verify)`` with ``E[A + 1]``
    from its acceptance curve at ``k`` and the prompt context, ``t_draft`` its
    batch-1 draft step on the device and ``t_verify`` the batch-1 verify step
    of the request's replica. With ``c = t_draft / t_verify`` the score is
    ``E[A + 1] / ((k c + 1) t_verify)``: for a given replica, ranking models by
    it ranks them by Leviathan et al. (2023)'s expected walltime improvement
    factor ``(1 − α^(k+1)) / ((1 − α)(k c + 1))``, with ``c`` taken from the
    LUTs instead of assumed. Ties go to the earlier listed model.
    """

    name: ClassVar[str] = "acceptance_speed"
    Params = AcceptanceSpeedParams

    def __init__(self, params: AcceptanceSpeedParams) -> None:
        self.params = params

    def choose(self, query: DraftModelQuery) -> int:
        """Return the index of the best-scoring candidate (the first among equals)."""
        best = 0
        best_score = -1.0
        for index, candidate in enumerate(query.candidates):
            score = tokens_per_second(candidate, query.k, query.verify_step_s)
            if score > best_score:
                best, best_score = index, score
        return best


@dataclass(frozen=True)
class FixedParams:
    """Parameters of :class:`Fixed`.

    Attributes:
        model: The drafter model's scenario name (``speculation.drafter_models[].name``).
    """

    model: str = param(
        min_length=1,
        description="The drafter model to use (a speculation.drafter_models name "
        "listed by a draft class with several models).",
    )


@DRAFT_SELECTION.register
class Fixed(DraftSelectionPolicy):
    """The named model wherever the request's device may run it; otherwise the first candidate.

    Configuration, not a heuristic: the model to use is the scenario's (or
    the online planner's ``draft_model`` choice). A class that does not list
    the model, or a request its LUTs or KV budget rule it out for, drafts
    with the first candidate, as ``first`` would.
    """

    name: ClassVar[str] = "fixed"
    Params = FixedParams

    def __init__(self, params: FixedParams) -> None:
        self.params = params

    def choose(self, query: DraftModelQuery) -> int:
        """Return the index of the candidate named ``model`` (0 without one)."""
        for index, candidate in enumerate(query.candidates):
            if candidate.name == self.params.model:
                return index
        return 0
