"""Kind ``replay``: accepted lengths replayed step by step from a measured log.

A replayed curve names a CSV log (:mod:`simulator.acceptance.replay_log`) of
accepted draft tokens per verify step, measured at one draft length
``replay.draft_length`` and one temperature. A draft of ``k`` tokens accepts
``min(logged, k)`` (a shorter draft keeps the logged prefix up to ``k``);
drafts longer than ``draft_length`` are refused (:attr:`ReplayModel.max_k`).
The context length and temperature of a query change nothing: each logged
step already carries its own context, and the log one temperature.

Two ways to draw:

* :class:`ReplayModel` itself (no request known) draws one logged step
  uniformly per verify round, with one ``rng.random()``: the log's empirical
  distribution of accepted lengths.
* :meth:`ReplayModel.for_request` gives a request one logged sequence
  (``replay.assign``: ``random`` picks by the request's acceptance level,
  ``in_order`` by request id modulo the pool size; the pool is the sequences of
  the request's category when the log has categories and the request one).
  The returned :class:`ReplaySession` answers the request's rounds with the
  sequence's steps in order, one step per round, with no random draw; when the
  request outlives its sequence it **starts over** from the sequence's first
  step (so a long request repeats its sequence's pattern rather than
  switching to another sequence's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.acceptance.binned import check_sample_count
from simulator.acceptance.info import CurveInfo, DescribedCurve, curve_info
from simulator.acceptance.protocol import AcceptanceModel, RequestTraits, UniformSource
from simulator.acceptance.replay_log import ReplayLog, read_replay_log
from simulator.errors import Issue, make_issue
from simulator.input_files import file_problem
from simulator.loading import resolve_path

KIND = "replay"
RANDOM = "random"
IN_ORDER = "in_order"
ASSIGN_RULES: tuple[str, ...] = (RANDOM, IN_ORDER)


def _mean_truncated(counts: Sequence[int], k: int) -> float:
    """Return the mean of ``min(a, k)`` for a histogram ``counts[a]`` of accepted lengths."""
    total = sum(counts)
    return math.fsum(count * min(a, k) for a, count in enumerate(counts)) / total


def _histogram(steps: Sequence[int]) -> tuple[int, ...]:
    """Return ``counts[a]``: how many of ``steps`` accepted ``a`` tokens, up to the longest.

    Sized by the longest logged step, not by ``replay.draft_length``, which
    may be any whole number (a huge one would not fit in memory).
    """
    counts = [0] * (max(steps, default=0) + 1)
    for a in steps:
        counts[a] += 1
    return tuple(counts)


class _Answers(DescribedCurve):
    """What a replayed model and its sessions share: name, info, draft length, checks."""

    def __init__(self, info: CurveInfo, draft_length: int, temperature: float) -> None:
        self.info = info
        self.draft_length = draft_length
        self.temperature = temperature

    @property
    def temperatures(self) -> tuple[float, ...]:
        """The one temperature the log was measured at."""
        return (self.temperature,)

    @property
    def max_k(self) -> int:
        """The draft length the log was measured at: the longest draft it answers for."""
        return self.draft_length

    def check_k(self, k: int) -> None:
        """Refuse a draft length outside ``0..draft_length``.

        Raises:
            ValueError: ``k`` is negative or above :attr:`max_k`.
        """
        if k < 0:
            raise ValueError(f"draft length k must be >= 0, got {k}")
        if k > self.draft_length:
            raise ValueError(
                f"acceptance curve {self.name!r} replays steps measured at draft length "
                f"{self.draft_length}; it cannot answer for k = {k} (allowed: k <= "
                f"{self.draft_length})"
            )


class ReplayModel(_Answers):
    """An acceptance model that replays a measured log of accepted lengths.

    Args:
        info: The curve's descriptive fields.
        log: The checked log (read by the builder; the constructor does no I/O).
        assign: How requests are given sequences: ``random`` or ``in_order``.
        temperature: The sampling temperature the log was measured at.
    """

    def __init__(self, info: CurveInfo, log: ReplayLog, assign: str, temperature: float) -> None:
        if assign not in ASSIGN_RULES:
            raise ValueError(f"assign must be one of {ASSIGN_RULES}, got {assign!r}")
        super().__init__(info, log.draft_length, temperature)
        self.log = log
        self.assign = assign
        self._steps: list[int] = [a for sequence in log.steps for a in sequence]
        self._steps_array = np.asarray(self._steps, dtype=np.int64)
        self._counts = _histogram(self._steps)
        self._expected: dict[int, float] = {}
        self._sequence_expected: dict[tuple[int, int], float] = {}
        self._all: tuple[int, ...] = tuple(range(len(log.steps)))
        pools: dict[str, list[int]] = {}
        if log.has_categories:
            for index, category in enumerate(log.categories):
                pools.setdefault(category, []).append(index)
        self._pools: dict[str, tuple[int, ...]] = {c: tuple(p) for c, p in sorted(pools.items())}

    @property
    def categories(self) -> tuple[str, ...]:
        """The task categories of the log's sequences, sorted (empty: no category column)."""
        return tuple(self._pools)

    @property
    def step_count(self) -> int:
        """The number of logged steps."""
        return len(self._steps)

    def pool(self, category: str) -> tuple[int, ...]:
        """Return the sequence indices a request of ``category`` may be given.

        Raises:
            ValueError: The log has categories but not ``category``.
        """
        if not self._pools or not category:
            return self._all
        found = self._pools.get(category)
        if found is None:
            raise ValueError(
                f"acceptance curve {self.name!r} has no logged sequences of category "
                f"{category!r}; it has {', '.join(self.categories)}"
            )
        return found

    def for_request(
        self, traits: RequestTraits, concentration: float | None = None
    ) -> AcceptanceModel:
        """Return a session replaying one logged sequence for the request.

        Raises:
            ValueError: A spread is asked for (a replayed log carries its own
                spread between requests), or the log has categories but not
                the request's.
        """
        if concentration is not None:
            raise ValueError(
                f"acceptance curve {self.name!r} is a replayed log (kind replay): its "
                "sequences carry their own spread between requests, so no request spread "
                f"(concentration {concentration}) can be applied to it"
            )
        pool = self.pool(traits.category)
        if self.assign == RANDOM:
            position = min(int(traits.quantile * len(pool)), len(pool) - 1)
        else:
            position = traits.request_id % len(pool)
        return self.session(pool[position])

    def session(self, index: int) -> ReplaySession:
        """Return a new session replaying sequence ``index`` from its first step."""
        return ReplaySession(self, index)

    def sequence_expected(self, index: int, k: int) -> float:
        """Return the mean of ``min(a, k)`` over the steps of sequence ``index``."""
        key = (index, k)
        found = self._sequence_expected.get(key)
        if found is None:
            self.check_k(k)
            counts = _histogram(self.log.steps[index])
            found = self._sequence_expected[key] = _mean_truncated(counts, k)
        return found

    def expected_accepted(self, k: int, context_len: int, temperature: float = 0.0) -> float:
        """Return the mean of ``min(a, k)`` over every logged step (bonus excluded)."""
        found = self._expected.get(k)
        if found is None:
            self.check_k(k)
            found = self._expected[k] = _mean_truncated(self._counts, k)
        return found

    def expected_tokens_per_verify(
        self, k: int, context_len: int, temperature: float = 0.0
    ) -> float:
        """Return E[A + 1]: the mean of ``min(a, k)`` plus the target's own token."""
        return self.expected_accepted(k, context_len, temperature) + 1.0

    def sample_accepted(
        self, k: int, context_len: int, rng: UniformSource, temperature: float = 0.0
    ) -> int:
        """Pick one logged step uniformly with one ``rng.random()``; return ``min(a, k)``."""
        if k < 0 or k > self.draft_length:
            self.check_k(k)
        steps = self._steps
        index = int(rng.random() * len(steps))
        a = steps[index if index < len(steps) else len(steps) - 1]
        return a if a < k else k

    def sample_accepted_many(
        self,
        k: int,
        context_len: int,
        n: int,
        rng: np.random.Generator,
        temperature: float = 0.0,
    ) -> np.ndarray:
        """Draw ``n`` values; equal to ``n`` calls of :meth:`sample_accepted` on ``rng``."""
        self.check_k(k)
        check_sample_count(n)
        steps = self._steps_array
        index = np.minimum((rng.random(n) * len(steps)).astype(np.int64), len(steps) - 1)
        return np.minimum(steps[index], k)

    def __repr__(self) -> str:
        return (
            f"ReplayModel(name={self.name!r}, method={self.method!r}, "
            f"sequences={len(self.log.steps)}, steps={len(self._steps)})"
        )


class ReplaySession(_Answers):
    """One request's replay of one logged sequence, a step per verify round.

    Each :meth:`sample_accepted` returns ``min(logged, k)`` for the step at
    the cursor and advances it, starting over from the first step after the
    last; it draws nothing from ``rng``.

    Args:
        model: The replayed curve.
        index: The sequence's position in the log.
    """

    def __init__(self, model: ReplayModel, index: int) -> None:
        super().__init__(model.info, model.draft_length, model.temperature)
        self.model = model
        self.index = index
        self._steps: list[int] = list(model.log.steps[index])
        self._cursor = 0

    @property
    def sequence_id(self) -> str:
        """The id of the replayed sequence."""
        return self.model.log.sequence_ids[self.index]

    @property
    def category(self) -> str:
        """The replayed sequence's task category ("" when the log has none)."""
        return self.model.log.categories[self.index]

    @property
    def categories(self) -> tuple[str, ...]:
        """The task categories of the curve's log, sorted."""
        return self.model.categories

    @property
    def cursor(self) -> int:
        """The position of the step the next round replays."""
        return self._cursor

    def for_request(
        self, traits: RequestTraits, concentration: float | None = None
    ) -> AcceptanceModel:
        """A session already answers one request; it answers for itself."""
        return self

    def expected_accepted(self, k: int, context_len: int, temperature: float = 0.0) -> float:
        """Return the mean of ``min(a, k)`` over the sequence's own steps."""
        return self.model.sequence_expected(self.index, k)

    def expected_tokens_per_verify(
        self, k: int, context_len: int, temperature: float = 0.0
    ) -> float:
        """Return the sequence's mean of ``min(a, k)`` plus one."""
        return self.model.sequence_expected(self.index, k) + 1.0

    def sample_accepted(
        self, k: int, context_len: int, rng: UniformSource, temperature: float = 0.0
    ) -> int:
        """Return ``min(logged, k)`` of the next step (no draw from ``rng``)."""
        if k < 0 or k > self.draft_length:
            self.check_k(k)
        cursor = self._cursor
        a = self._steps[cursor]
        cursor += 1
        self._cursor = 0 if cursor == len(self._steps) else cursor
        return a if a < k else k

    def sample_accepted_many(
        self,
        k: int,
        context_len: int,
        n: int,
        rng: np.random.Generator,
        temperature: float = 0.0,
    ) -> np.ndarray:
        """Return the next ``n`` steps, as ``n`` calls of :meth:`sample_accepted` would."""
        self.check_k(k)
        check_sample_count(n)
        return np.fromiter(
            (self.sample_accepted(k, context_len, rng) for _ in range(n)), np.int64, count=n
        )

    def __repr__(self) -> str:
        return (
            f"ReplaySession(name={self.name!r}, sequence={self.sequence_id!r}, "
            f"cursor={self._cursor})"
        )


def _replay_section(document: Mapping[str, Any]) -> Mapping[str, Any] | None:
    section = document.get("replay")
    return section if isinstance(section, Mapping) else None


def check_replay(document: Mapping[str, Any], file: Path) -> list[Issue]:
    """Return the problem of a replay log that cannot be opened (its content is read by the builder)."""
    section = _replay_section(document)
    name = None if section is None else section.get("file")
    if not isinstance(name, str) or not name:
        return []  # the schema reports it
    path = resolve_path(file.parent, name)
    problem = file_problem(path)
    if problem is None:
        return []
    return [
        make_issue(
            file,
            "replay.file",
            name,
            f"an existing CSV replay log, relative to this file (resolved: {path})",
            problem,
        )
    ]


def build_replay(document: Mapping[str, Any], file: Path) -> ReplayModel:
    """Read the replay log a schema-valid curve document names and build its model.

    Raises:
        InputError: The log is unreadable, or with every problem in it.
    """
    section = _replay_section(document)
    assert section is not None  # the schema requires it for kind replay
    draft_length = int(section["draft_length"])
    log = read_replay_log(resolve_path(file.parent, str(section["file"])), draft_length)
    return ReplayModel(
        curve_info(document, file),
        log,
        str(section.get("assign", RANDOM)),
        float(section.get("temperature", 0.0)),
    )
