"""The request table: every request of a run, in arrival order, as columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.workload.arrays import (
    FloatArray,
    IntArray,
    StrArray,
    constructor_arguments,
    frozen,
    rebuild,
    text_array,
)
from simulator.workload.categories import NO_CATEGORY
from simulator.workload.slo import DEFAULT_CLASS, SloTargets

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, eq=False)
class RequestTable:
    """The requests of one run, one array element per request (read-only arrays).

    Attributes:
        arrival_s: Arrival time (seconds; float64, non-decreasing).
        prompt_tokens: Prompt length (tokens; int64 >= 1).
        output_tokens: Tokens to generate (int64 >= 1).
        slo_class: SLO class name of each request (text array).
        origin: Client device class id of each request, "" for none (text array).
        slos: SLO class name -> targets; holds every class in ``slo_class``.
        category: Task category of each request, "" for none (text array).
        first_id: Id of the first request (0 for a whole workload; a window
            of a larger table keeps the ids of its parent).
        prefix_blocks: Each request's prompt block ids (a tuple of ints, its
            first block first; equal ids are equal prompt content up to that
            block), or None when the workload gives none (a trace's
            ``hash_ids``; read by the prefix cache).
        shared_prefix_tokens: Tokens of the shared system prompt at the start
            of each request's prompt (0: none), or None when the workload
            declares none (``synthetic.shared_prefix``).
        session: Each request's session (``synthetic.sessions``: the turns
            of one conversation share it), or None when the workload has no
            sessions.
        request_id: ``first_id .. first_id + n - 1`` in arrival order (set by
            the constructor).
    """

    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    slo_class: StrArray
    origin: StrArray
    category: StrArray
    slos: Mapping[str, SloTargets]
    first_id: int = 0
    prefix_blocks: tuple[tuple[int, ...], ...] | None = None
    shared_prefix_tokens: IntArray | None = None
    session: IntArray | None = None
    request_id: IntArray = field(init=False)

    def __post_init__(self) -> None:
        size = len(self.arrival_s)
        arrays = {
            "arrival_s": np.asarray(self.arrival_s, dtype=np.float64),
            "prompt_tokens": np.asarray(self.prompt_tokens, dtype=np.int64),
            "output_tokens": np.asarray(self.output_tokens, dtype=np.int64),
            "slo_class": text_array(self.slo_class),
            "origin": text_array(self.origin),
            "category": text_array(self.category),
        }
        for name, array in arrays.items():
            if array.ndim != 1 or len(array) != size:
                raise ValueError(f"RequestTable.{name} must be 1-D with {size} elements")
            object.__setattr__(self, name, frozen(array))
        if size and not np.all(np.isfinite(self.arrival_s)):
            raise ValueError("RequestTable.arrival_s must be finite")
        if size and np.any(np.diff(self.arrival_s) < 0):
            raise ValueError("RequestTable.arrival_s must be non-decreasing")
        if size and min(int(self.prompt_tokens.min()), int(self.output_tokens.min())) < 1:
            raise ValueError("RequestTable token counts must be >= 1")
        unknown = set(self.slo_class.tolist()) - set(self.slos)
        if unknown:
            raise ValueError(f"RequestTable has SLO classes without targets: {sorted(unknown)}")
        object.__setattr__(self, "slos", MappingProxyType(dict(self.slos)))
        if self.first_id < 0:
            raise ValueError("RequestTable.first_id must be >= 0")
        if self.prefix_blocks is not None and len(self.prefix_blocks) != size:
            raise ValueError(f"RequestTable.prefix_blocks must have {size} elements")
        if self.shared_prefix_tokens is not None:
            shared = np.asarray(self.shared_prefix_tokens, dtype=np.int64)
            if shared.ndim != 1 or len(shared) != size:
                raise ValueError(f"RequestTable.shared_prefix_tokens must have {size} elements")
            if size and (shared.min() < 0 or np.any(shared > self.prompt_tokens)):
                raise ValueError("RequestTable.shared_prefix_tokens must be in [0, prompt_tokens]")
            object.__setattr__(self, "shared_prefix_tokens", frozen(shared))
        if self.session is not None:
            session = np.asarray(self.session, dtype=np.int64)
            if session.ndim != 1 or len(session) != size:
                raise ValueError(f"RequestTable.session must have {size} elements")
            object.__setattr__(self, "session", frozen(session))
        ids = np.arange(self.first_id, self.first_id + size, dtype=np.int64)
        object.__setattr__(self, "request_id", frozen(ids))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as the constructor arguments (the read-only mapping cannot be pickled)."""
        return (rebuild, (type(self), constructor_arguments(self)))

    @classmethod
    def from_columns(
        cls,
        arrival_s: Sequence[float] | FloatArray,
        prompt_tokens: Sequence[int] | IntArray,
        output_tokens: Sequence[int] | IntArray,
        *,
        slos: Mapping[str, SloTargets],
        slo_class: Sequence[str] | StrArray | None = None,
        origin: Sequence[str] | StrArray | None = None,
        category: Sequence[str] | StrArray | None = None,
    ) -> RequestTable:
        """Build a table from plain sequences.

        Args:
            arrival_s: Arrival times (seconds, non-decreasing).
            prompt_tokens: Prompt lengths.
            output_tokens: Output lengths.
            slos: SLO targets by class name.
            slo_class: Class per request (default: all ``default``).
            origin: Origin per request (default: all "").
            category: Task category per request (default: all "", none).
        """
        size = len(arrival_s)
        return cls(
            arrival_s=np.asarray(arrival_s, dtype=np.float64),
            prompt_tokens=np.asarray(prompt_tokens, dtype=np.int64),
            output_tokens=np.asarray(output_tokens, dtype=np.int64),
            slo_class=text_array(DEFAULT_CLASS, size)
            if slo_class is None
            else text_array(slo_class),
            origin=text_array("", size) if origin is None else text_array(origin),
            category=text_array(NO_CATEGORY, size) if category is None else text_array(category),
            slos=slos,
        )

    def __len__(self) -> int:
        return len(self.arrival_s)

    def window(self, start_s: float, end_s: float, *, rebase: bool = True) -> RequestTable:
        """Return the requests arriving in ``[start_s, end_s)``.

        The requests keep their ids, so a what-if window started from a
        run's state at ``start_s`` reports them under the same ids.

        Args:
            start_s: Start of the slice.
            end_s: Its end (not before ``start_s``).
            rebase: Shift the clock so the slice starts at 0 (``False``: keep
                the table's clock, for a window whose clock starts at ``start_s``).
        """
        if not end_s >= start_s:
            raise ValueError(f"window end {end_s} is before its start {start_s}")
        lo = int(np.searchsorted(self.arrival_s, start_s, side="left"))
        hi = int(np.searchsorted(self.arrival_s, end_s, side="left"))
        return RequestTable(
            arrival_s=self.arrival_s[lo:hi] - (start_s if rebase else 0.0),
            prompt_tokens=self.prompt_tokens[lo:hi],
            output_tokens=self.output_tokens[lo:hi],
            slo_class=self.slo_class[lo:hi],
            origin=self.origin[lo:hi],
            category=self.category[lo:hi],
            slos=self.slos,
            first_id=self.first_id + lo,
            prefix_blocks=None if self.prefix_blocks is None else self.prefix_blocks[lo:hi],
            shared_prefix_tokens=None
            if self.shared_prefix_tokens is None
            else self.shared_prefix_tokens[lo:hi],
            session=None if self.session is None else self.session[lo:hi],
        )

    def prefixes(self, block_tokens: int) -> dict[int, tuple[int, ...]]:
        """Request id -> its prompt block ids (blocks of ``block_tokens``), where it has any.

        A trace's ids are its ``hash_ids``. The turns of a multi-turn
        session share the ids of their conversation's full blocks (see
        :meth:`_session_prefixes`). With a shared system prompt of
        ``s`` tokens, its ``s // block_tokens`` full blocks are ids ``0, 1,
        ...`` in every prompt that has it, and every other block of every
        prompt (the one the system prompt ends in included) has an id of its
        own.
        """
        first = self.first_id
        blocks = self.prefix_blocks
        if blocks is not None:
            return {first + i: ids for i, ids in enumerate(blocks) if ids}
        if self.session is not None:
            return self._session_prefixes(block_tokens)
        shared = self.shared_prefix_tokens
        if shared is None:
            return {}
        common = int(shared.max()) // block_tokens if len(shared) else 0
        next_id = common
        out: dict[int, tuple[int, ...]] = {}
        for i, (prompt, tokens) in enumerate(
            zip(self.prompt_tokens.tolist(), shared.tolist(), strict=True)
        ):
            own = tokens // block_tokens
            total = -(-prompt // block_tokens)
            out[first + i] = (*range(own), *range(next_id, next_id + total - own))
            next_id += total - own
        return out

    def _session_prefixes(self, block_tokens: int) -> dict[int, tuple[int, ...]]:
        """Block ids of multi-turn sessions (see :meth:`prefixes`).

        The turns of a session are one growing conversation: full block
        ``j`` of any of its prompts is the conversation's block ``j``, with
        one id per session and ``j``; a prompt's last, partial block has an
        id of its own.
        """
        assert self.session is not None
        sessions = self.session.tolist()
        prompts = self.prompt_tokens.tolist()
        full: dict[int, int] = {}
        for session, prompt in zip(sessions, prompts, strict=True):
            full[session] = max(full.get(session, 0), prompt // block_tokens)
        base: dict[int, int] = {}
        next_id = 0
        for session in sorted(full):
            base[session] = next_id
            next_id += full[session]
        out: dict[int, tuple[int, ...]] = {}
        for i, (session, prompt) in enumerate(zip(sessions, prompts, strict=True)):
            start = base[session]
            ids = tuple(range(start, start + prompt // block_tokens))
            if prompt % block_tokens:
                ids = (*ids, next_id)
                next_id += 1
            out[self.first_id + i] = ids
        return out

    def slo_of(self, class_name: str) -> SloTargets:
        """Return the targets of SLO class ``class_name``.

        Raises:
            KeyError: The class is unknown.
        """
        try:
            return self.slos[class_name]
        except KeyError:
            known = ", ".join(sorted(self.slos))
            raise KeyError(f"unknown SLO class {class_name!r}; known: {known}") from None

    def slo_class_names(self) -> list[str]:
        """Return the SLO class of every request as a list of ``str`` (row order)."""
        return _names(self.slo_class)

    def origin_names(self) -> list[str]:
        """Return the origin of every request as a list of ``str`` (row order; "" = none)."""
        return _names(self.origin)

    def category_names(self) -> list[str]:
        """Return the task category of every request as a list of ``str`` ("" = none)."""
        return _names(self.category)

    def to_frame(self) -> pd.DataFrame:
        """Return the table as a DataFrame (one row per request)."""
        import pandas as pd

        frame: pd.DataFrame = pd.DataFrame(
            {
                "request_id": self.request_id,
                "arrival_s": self.arrival_s,
                "prompt_tokens": self.prompt_tokens,
                "output_tokens": self.output_tokens,
                "slo_class": self.slo_class_names(),
                "origin": self.origin_names(),
                "category": self.category_names(),
            }
        )
        return frame


def _names(values: StrArray) -> list[str]:
    """The texts of ``values`` as ``str``, one object per distinct text.

    A run's requests hold a few distinct class, origin and category names;
    sharing one ``str`` per name saves an object per request and field.
    """
    shared: dict[str, str] = {}  # each text -> its one object (no sort of the column)
    return [shared.setdefault(text, str(text)) for text in values.tolist()]
