"""Draft-length (k) controllers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from policies.batching import NO_PARAMS_SCHEMA, NoParams
from policies.families import K_CONTROL
from policies.views import KSignals


class KController(Protocol):
    """Chooses k for a request's next speculation round.

    Attributes:
        signal_window: How many recent decode-lane iterations and verified
            rounds of each replica the windowed signals of
            :class:`~policies.views.KSignals` cover (``decode_p95_ms``,
            ``window_acceptance``). 0: the controller reads none of the
            fields after ``context_len``, and the engine keeps no history.
    """

    signal_window: int

    def next_k(self, signals: KSignals) -> int:
        """Return k for the next round, within ``[signals.k_min, signals.k_max]``."""
        ...


def _clip(k: int, signals: KSignals) -> int:
    if k > signals.k_max:
        return signals.k_max
    if k < signals.k_min:
        return signals.k_min
    return k


@K_CONTROL.register
class StaticK:
    """The same k every round: the scenario's ``speculation.k``."""

    name: ClassVar[str] = "static"
    Params: ClassVar[type[NoParams]] = NoParams
    params_schema: ClassVar[Mapping[str, Any]] = NO_PARAMS_SCHEMA
    signal_window: ClassVar[int] = 0

    def __init__(self, k: int, params: NoParams | None = None) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self.params = params if params is not None else NoParams()

    def next_k(self, signals: KSignals) -> int:
        """Return the fixed k, clipped to the allowed range."""
        return _clip(self.k, signals)
