"""Lane arbitration on a target replica: which lane's work forms the next iteration.

A replica is a set of lanes (prefill, and the decode lane that runs plain
decode, verify or fused work) plus an arbitration rule. At every decision
the rule asks the lanes what they could run now (each lane applies its own
batching policy, the running-set cap and KV) and chooses one iteration:

- ``prefill_first``: a whole-prompt prefill batch whenever the prefill lane
  has one, else a decode-lane iteration (vLLM's default scheduler before
  chunked prefill; SGLang with chunked prefill off).
- ``chunked_prefill``: every iteration has a token budget; decode-lane work
  takes its tokens first (1 per plain decode, k + 1 per verify or fused
  round) and prefill chunks fill the rest, a prompt's prefill spreading over
  several iterations (Sarathi-Serve, Agrawal et al., OSDI 2024; the default
  of current vLLM and SGLang).

Rules see the replica only through :class:`ReplicaLanes`; what a lane offers
is an opaque batch that the replica knows how to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

from policies.batching import NO_PARAMS_SCHEMA, NoParams
from policies.families import ARBITRATION

INF = float("inf")


class Work(NamedTuple):
    """One iteration chosen by an arbitration rule (opaque batches from the lanes).

    Attributes:
        prefill: A whole-prompt prefill batch, or ``None``.
        step: A decode-lane batch, or ``None``.
        chunks: Prefill chunks riding with ``step`` (chunked prefill), or ``None``.
    """

    prefill: Any = None
    step: Any = None
    chunks: Any = None


class ReplicaLanes(Protocol):
    """What an arbitration rule may ask a replica's lanes."""

    def offer_prefill(self) -> tuple[Any, float]:
        """Return the prefill lane's batch of whole prompts now, else ``None`` and when to ask again."""
        ...

    def offer_step(self, token_budget: int | None = None) -> tuple[Any, float]:
        """Return the decode lane's batch now (within ``token_budget`` tokens), else ``None`` and a wake time."""
        ...

    def step_tokens(self, step: Any) -> int:
        """Return the tokens a decode-lane batch processes."""
        ...

    def offer_chunks(self, step: Any, token_budget: int) -> Any:
        """Return prefill chunks that fit ``token_budget`` tokens beside ``step``, or ``None``."""
        ...


class ArbitrationRule(Protocol):
    """Chooses a replica's next iteration."""

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """Return the next iteration, or ``None`` and when to decide again (inf: on a change)."""
        ...


@ARBITRATION.register
class PrefillFirst:
    """Whole-prompt prefill batches go before decode-lane iterations."""

    name: ClassVar[str] = "prefill_first"
    Params: ClassVar[type[NoParams]] = NoParams
    params_schema: ClassVar[Mapping[str, Any]] = NO_PARAMS_SCHEMA

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params if params is not None else NoParams()

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """Run the prefill lane's batch if it has one, else the decode lane's."""
        batch, wake_at = lanes.offer_prefill()
        if batch is not None:
            return Work(prefill=batch), INF
        step, step_wake_at = lanes.offer_step()
        if step is not None:
            return Work(step=step), wake_at
        return None, min(wake_at, step_wake_at)


@dataclass(frozen=True)
class ChunkedPrefillParams:
    """Parameters of :class:`ChunkedPrefill`.

    Attributes:
        token_budget: Most tokens one iteration processes (decode tokens plus
            prefill chunk tokens), like vLLM's ``max_num_batched_tokens``.
    """

    token_budget: int = 2048


@ARBITRATION.register
class ChunkedPrefill:
    """Decode-lane work first, prefill chunks in the rest of a per-iteration token budget."""

    name: ClassVar[str] = "chunked_prefill"
    Params: ClassVar[type[ChunkedPrefillParams]] = ChunkedPrefillParams
    params_schema: ClassVar[Mapping[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "token_budget": {
                "type": "integer",
                "minimum": 1,
                "default": 2048,
                "description": "Most tokens per iteration: decode tokens (1 per plain decode, "
                "k + 1 per verify or fused round) plus prefill chunk tokens (vLLM's "
                "max_num_batched_tokens; 2048 is a budget Sarathi-Serve evaluates).",
            }
        },
    }

    def __init__(self, params: ChunkedPrefillParams | None = None) -> None:
        self.params = params if params is not None else ChunkedPrefillParams()
        self.token_budget = self.params.token_budget

    def choose(self, lanes: ReplicaLanes) -> tuple[Work | None, float]:
        """Fill the budget with the decode lane's batch, then with prefill chunks."""
        budget = self.token_budget
        step, wake_at = lanes.offer_step(budget)
        left = budget - (lanes.step_tokens(step) if step is not None else 0)
        chunks = lanes.offer_chunks(step, left) if left > 0 else None
        if step is None and chunks is None:
            return None, wake_at
        return Work(step=step, chunks=chunks), wake_at if step is None else INF
