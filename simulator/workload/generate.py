"""Turning a :class:`WorkloadSpec` into the run's :class:`RequestTable`.

Randomness comes only from the named streams ``arrivals`` (synthetic arrival
times), ``lengths`` (sub-stream 0: prompt lengths, 1: output lengths, 2: SLO
classes of synthetic requests), ``sessions`` (multi-turn sessions' turn counts
and think times) and ``origins`` (origin assignment), so the
same seed always gives the same table and changing, say, the output length
distribution leaves arrivals, prompt lengths and origins unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from simulator.limits import MAX_ARRIVAL_S
from simulator.rng import RandomStreams
from simulator.workload.arrays import FloatArray, IntArray, StrArray, text_array
from simulator.workload.arrivals import sample_arrivals
from simulator.workload.categories import NO_CATEGORY
from simulator.workload.distributions import sample_length_pairs
from simulator.workload.origins import assign_origins
from simulator.workload.requests import RequestTable
from simulator.workload.slo import DEFAULT_CLASS
from simulator.workload.spec import SyntheticSource, TraceSource, WorkloadSpec
from simulator.workload.trace_table import MAX_REQUEST_TOKENS


class ArrivalOverflowError(ValueError):
    """Arrival times divided by ``arrival_scale`` pass :data:`~simulator.limits.MAX_ARRIVAL_S`.

    Attributes:
        last_s: The latest arrival before scaling (seconds; ``inf`` when the
            arrival process itself overflowed).
        scale: The ``arrival_scale``.
    """

    def __init__(self, last_s: float, scale: float) -> None:
        super().__init__(f"arrival {last_s:g} s / arrival_scale {scale:g} is not finite")
        self.last_s = last_s
        self.scale = scale


PROMPT_SUBSTREAM = 0
OUTPUT_SUBSTREAM = 1
CLASS_SUBSTREAM = 2


def _synthetic(
    source: SyntheticSource, max_requests: int | None, streams: RandomStreams
) -> tuple[FloatArray, IntArray, IntArray, StrArray]:
    if source.arrival is None:
        # Closed loop: the users decide when requests are sent.
        assert source.num_requests is not None
        arrival = np.zeros(source.num_requests)
    else:
        arrival = sample_arrivals(
            source.arrival,
            streams.get("arrivals"),
            count=source.num_requests,
            duration_s=source.duration_s,
        )
    if max_requests is not None:
        arrival = arrival[:max_requests]
    size = len(arrival)
    prompt, output = sample_length_pairs(
        source.prompt_tokens,
        source.output_tokens,
        size,
        streams.child("lengths", PROMPT_SUBSTREAM),
        streams.child("lengths", OUTPUT_SUBSTREAM),
    )
    classes = _slo_classes(source, size, streams)
    return arrival, prompt, output, classes


def _trace(
    spec: WorkloadSpec, source: TraceSource, streams: RandomStreams
) -> tuple[
    FloatArray,
    IntArray,
    IntArray,
    StrArray,
    StrArray,
    StrArray,
    tuple[tuple[int, ...], ...] | None,
]:
    table = source.sliced(spec.max_requests)
    assert table.arrival_s is not None  # the builder only accepts timed traces
    size = len(table)
    prompt = table.prompt_tokens
    output = table.output_tokens
    first, second = spec.prompt_length_override, spec.output_length_override
    if first is not None and second is not None:
        prompt, output = sample_length_pairs(
            first,
            second,
            size,
            streams.child("lengths", PROMPT_SUBSTREAM),
            streams.child("lengths", OUTPUT_SUBSTREAM),
        )
    elif first is not None:
        prompt = first.sample(size, streams.child("lengths", PROMPT_SUBSTREAM))
    elif second is not None:
        output = second.sample(size, streams.child("lengths", OUTPUT_SUBSTREAM))
    classes = text_array(DEFAULT_CLASS, size)
    if table.slo_class is not None:
        classes = np.where(table.slo_class == "", DEFAULT_CLASS, table.slo_class)
    origins = table.origin if table.origin is not None else text_array("", size)
    categories = (
        text_array(NO_CATEGORY, size) if table.category is None else text_array(table.category)
    )
    # Block ids describe the trace's prompts: prompts drawn anew have none.
    prefix = table.hash_ids if first is None else None
    return table.arrival_s, prompt, output, text_array(classes), origins, categories, prefix


SESSION_TURNS_SUBSTREAM = 0
SESSION_THINK_SUBSTREAM = 1


def _sessions(
    source: SyntheticSource, max_requests: int | None, streams: RandomStreams
) -> tuple[FloatArray, IntArray, IntArray, StrArray, IntArray]:
    """Requests of multi-turn sessions, in arrival order, and each one's session.

    The arrival process draws each session's first turn; turn ``i + 1``
    arrives a think time after turn ``i``'s arrival (open loop). Each
    session's turn count (stream ``sessions`` sub-stream 0) and think times
    (sub-stream 1) are drawn session by session, and the user messages and
    outputs of all turns, session by session, from ``lengths`` as a plain
    synthetic workload's prompts and outputs. Turn ``i + 1``'s prompt is turn
    ``i``'s prompt and output followed by its own user message; a session
    ends before a turn whose prompt or output would pass
    :data:`~simulator.workload.trace_table.MAX_REQUEST_TOKENS`.
    ``max_requests`` then keeps the earliest requests.
    """
    sessions = source.sessions
    assert sessions is not None and source.arrival is not None
    starts = sample_arrivals(
        source.arrival,
        streams.get("arrivals"),
        count=source.num_requests,
        duration_s=source.duration_s,
    )
    turns = sessions.turns.sample(len(starts), streams.child("sessions", SESSION_TURNS_SUBSTREAM))
    total = int(turns.sum())
    message, output = sample_length_pairs(
        source.prompt_tokens,
        source.output_tokens,
        total,
        streams.child("lengths", PROMPT_SUBSTREAM),
        streams.child("lengths", OUTPUT_SUBSTREAM),
    )
    think = streams.child("sessions", SESSION_THINK_SUBSTREAM)
    arrival_list: list[float] = []
    prompt_list: list[int] = []
    output_list: list[int] = []
    session_list: list[int] = []
    row = 0
    messages, outputs = message.tolist(), output.tolist()
    for session, (start, count) in enumerate(zip(starts.tolist(), turns.tolist(), strict=True)):
        at_s, prompt = float(start), 0
        for turn in range(count):
            if turn:
                at_s += sessions.think_time.sample(think)
                prompt += output_list[-1]
            prompt += messages[row + turn]
            if max(prompt, outputs[row + turn]) > MAX_REQUEST_TOKENS:
                break
            arrival_list.append(at_s)
            prompt_list.append(prompt)
            output_list.append(outputs[row + turn])
            session_list.append(session)
        row += count
    arrival = np.asarray(arrival_list, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    if max_requests is not None:
        order = order[:max_requests]
    size = len(order)
    classes = _slo_classes(source, size, streams)
    return (
        arrival[order],
        np.asarray(prompt_list, dtype=np.int64)[order],
        np.asarray(output_list, dtype=np.int64)[order],
        classes,
        np.asarray(session_list, dtype=np.int64)[order],
    )


def _categories(source: SyntheticSource, size: int, streams: RandomStreams) -> StrArray:
    """Each synthetic request's task category, drawn from the mix (stream ``categories``)."""
    names = [name for name, _ in source.category_mix]
    if not names:
        return text_array(NO_CATEGORY, size)
    if len(names) == 1:
        return text_array(names[0], size)
    weights = np.array([w for _, w in source.category_mix], dtype=float)
    picks = streams.get("categories").choice(len(names), size=size, p=weights / weights.sum())
    return text_array(np.asarray(names, dtype=np.str_)[picks])


def _shared_prefix(source: SyntheticSource, size: int, streams: RandomStreams) -> IntArray | None:
    """Tokens of the shared system prompt in front of each synthetic prompt (None: no prefix).

    Each request has it with probability ``fraction`` (stream ``prefixes``).
    """
    shared = source.shared_prefix
    if shared is None:
        return None
    has = streams.get("prefixes").random(size) < shared.fraction
    return np.where(has, shared.tokens, 0).astype(np.int64)


def generate_requests(
    spec: WorkloadSpec,
    client_classes: Sequence[tuple[str, int]],
    streams: RandomStreams,
) -> RequestTable:
    """Generate the requests of a run.

    Trace sources replay the slice (rebased so the first arrival is at 0);
    synthetic sources draw arrivals from t = 0. Then ``max_requests`` caps the
    count, arrival times are divided by ``arrival_scale``, and requests
    without an origin get one by the origin rule. A closed-loop synthetic
    workload has no arrival process: its arrival times are all 0 (the engine's
    users decide when each request is sent).

    Args:
        spec: The workload.
        client_classes: ``(device class id, count)`` of the scenario's client
            (draft-role) device classes in declaration order; may be empty,
            and then requests without an origin keep "".
        streams: The run's random streams (only ``arrivals``, ``lengths``,
            ``origins`` and ``categories`` are used).

    Raises:
        ArrivalOverflowError: An arrival time divided by ``arrival_scale`` is later
            than :data:`~simulator.limits.MAX_ARRIVAL_S` (or not finite).
    """
    session = None
    if isinstance(spec.source, SyntheticSource):
        with np.errstate(over="ignore"):  # an overflow is refused below
            if spec.source.sessions is not None:
                arrival, prompt, output, classes, session = _sessions(
                    spec.source, spec.max_requests, streams
                )
            else:
                arrival, prompt, output, classes = _synthetic(
                    spec.source, spec.max_requests, streams
                )
        origins = text_array("", len(arrival))
        categories = _categories(spec.source, len(arrival), streams)
        prefix = None
        shared = _shared_prefix(spec.source, len(arrival), streams)
        if shared is not None:
            prompt = prompt + shared
    else:
        arrival, prompt, output, classes, origins, categories, prefix = _trace(
            spec, spec.source, streams
        )
        shared = None
    origins = assign_origins(origins, spec.origin, client_classes, streams.get("origins"))
    with np.errstate(over="ignore"):
        scaled = arrival / spec.arrival_scale
    if len(scaled) and not (np.isfinite(scaled).all() and np.max(scaled) <= MAX_ARRIVAL_S):
        last_s = float(np.max(arrival)) if np.isfinite(arrival).all() else math.inf
        raise ArrivalOverflowError(last_s, spec.arrival_scale)
    return RequestTable(
        arrival_s=scaled,
        prompt_tokens=prompt,
        output_tokens=output,
        slo_class=classes,
        origin=origins,
        category=categories,
        slos=spec.slo_classes,
        prefix_blocks=prefix,
        shared_prefix_tokens=shared,
        session=session,
    )


def _slo_classes(source: SyntheticSource, size: int, streams: RandomStreams) -> StrArray:
    """Each of ``size`` requests' SLO class, drawn with ``slo_class_mix``'s weights."""
    names = [name for name, _ in source.slo_class_mix]
    if len(names) == 1:
        return text_array(names[0], size)
    weights = np.array([w for _, w in source.slo_class_mix], dtype=float)
    rng = streams.child("lengths", CLASS_SUBSTREAM)
    picks = rng.choice(len(names), size=size, p=weights / weights.sum())
    return np.asarray(names, dtype=np.str_)[picks]
