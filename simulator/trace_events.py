"""Timelines of a run as Chrome trace-event JSON (``simulate SCENARIO --trace-events FILE``).

:class:`ChromeTraceTracer` is a :class:`~simulator.engine.tracing.Tracer`: it
keeps the spans the engine reports (replica iterations, draft device jobs,
network transfers) and :meth:`ChromeTraceTracer.write` turns them into the
JSON Object Format of the Trace Event Format, which ui.perfetto.dev and
chrome://tracing open:

- one process per replica, named by its pool and index (``pool a100-tp4 /
  replica 0``), with a ``prefill`` and a ``decode`` track (a
  replica runs one iteration at a time; mixed chunked-prefill iterations are
  on the ``decode`` track);
- one process per draft device class, with one track per device that drafted;
- one process per scenario link (all device instances of it), with as many
  ``up`` and ``down`` tracks as transfers overlapped in that direction (each
  transfer goes on the first track free at its start, so transfers on one
  track never overlap);
- a complete event (``ph: "X"``) per span, times in microseconds of simulated
  time rounded to whole microseconds, its ``args`` holding the batch size,
  tokens, ``k``, phase and the first :data:`REQUEST_IDS_IN_ARGS` request ids;
- flow arrows (``ph: "s"``, ``"t"``, ``"f"``, ``id`` = request id) through each
  followed request's spans in time order: prompt upload, prefill, first
  token, then draft, bundle, verify and result round after round.

Two options keep big runs usable: ``follow_requests`` follows only the first
N requests to arrive (their transfers, draft device work and flows are
recorded; replica iterations are always recorded), and ``max_events`` stops
recording once that many events (complete and flow) would be written; the
file's ``metadata`` says whether it was capped and how many spans were left
out.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from simulator._version import __version__
from simulator.engine.tracing import Span
from simulator.errors import InputError, make_issue

CATEGORY = "specdec"
"""Category of every event (flow arrows bind to slices of the same category)."""
FLOW_NAME = "request"
"""Name of every flow event (a flow is one request's chain)."""
REQUEST_IDS_IN_ARGS = 16
"""Request ids listed in an event's ``args`` (the rest are counted only): configuration."""
FLOW_PHASES = frozenset(
    {
        "prompt",
        "prefill",
        "mixed",
        "first_token",
        "draft",
        "bundle",
        "verify",
        "fused",
        "decode",
        "result",
        "last_token",
    }
)
"""Phases a request's flow passes through (the device's draft prefill runs beside the
prompt upload and the target prefill, so no arrow goes through it)."""
_CAUSAL_RANK = {
    "prompt": 0,
    "prefill": 1,
    "mixed": 1,
    "first_token": 2,
    "draft": 3,
    "bundle": 4,
    "verify": 5,
    "fused": 5,
    "decode": 5,
    "result": 6,
    "last_token": 6,
}
"""Order of a request's spans that start in the same microsecond."""
_PLACE_ORDER = {"replica": 0, "device": 1, "link": 2}
_REPLICA_LANES = {"prefill": 1, "decode": 2}
COMMAND_LINE = "command line"


class ChromeTraceTracer:
    """Collects timeline spans and writes them as Chrome trace-event JSON.

    Args:
        follow_requests: Follow only the first this many requests to arrive
            (``None``: all).
        max_events: Stop recording once this many trace events (complete and
            flow events; metadata events do not count) would be written
            (``None``: no cap).
    """

    def __init__(self, follow_requests: int | None = None, max_events: int | None = None) -> None:
        self.follow_requests = follow_requests
        self.max_events = max_events
        self.spans: list[Span] = []
        self._followed: set[int] = set()
        self._counted = 0
        self.capped = False
        self.dropped = 0
        """Spans left out once the cap was reached."""

    def _follows(self, request_id: int) -> bool:
        return self.follow_requests is None or request_id in self._followed

    def event(self, time_s: float, kind: str, subject: str, detail: str) -> None:
        """Note arrivals (the first ``follow_requests`` are followed); ignore other events."""
        limit = self.follow_requests
        if kind == "arrival" and limit is not None and len(self._followed) < limit:
            self._followed.add(int(subject.rsplit(" ", 1)[1]))

    def span(self, span: Span) -> None:
        """Keep ``span`` unless it concerns no followed request or the cap is reached."""
        if self.follow_requests is None:
            followed = len(span.requests)
        else:
            followed = sum(1 for rid in span.requests if rid in self._followed)
            if followed == 0 and span.place != "replica":
                return
        if self.capped:
            self.dropped += 1
            return
        cost = 1 + (followed if span.phase in FLOW_PHASES else 0)
        if self.max_events is not None and self._counted + cost > self.max_events:
            self.capped = True
            self.dropped += 1
            return
        self._counted += cost
        self.spans.append(span)

    # -- the document ---------------------------------------------------------
    def document(self) -> dict[str, Any]:
        """The trace as a JSON-ready dict (``traceEvents``, ``displayTimeUnit``, ``metadata``)."""
        order = sorted(
            range(len(self.spans)),
            key=lambda i: (_us(self.spans[i].start_s), _PLACE_ORDER[self.spans[i].place], i),
        )
        spans = [self.spans[i] for i in order]
        tracks = _Tracks(spans)
        complete: list[dict[str, Any]] = []
        steps: dict[int, list[tuple[int, int, int, int, int]]] = {}
        for seq, span in enumerate(spans):
            ts = _us(span.start_s)
            dur = _us(span.start_s + span.duration_s) - ts
            pid, tid = tracks.place(span, ts, ts + dur)
            complete.append(
                {
                    "name": span.phase,
                    "cat": CATEGORY,
                    "ph": "X",
                    "ts": ts,
                    "dur": dur,
                    "pid": pid,
                    "tid": tid,
                    "args": _args(span),
                }
            )
            if span.phase in FLOW_PHASES:
                rank = _CAUSAL_RANK[span.phase]
                for rid in span.requests:
                    if self._follows(rid):
                        steps.setdefault(rid, []).append((ts, rank, seq, pid, tid))
        flows: list[dict[str, Any]] = []
        for rid in sorted(steps):
            chain = sorted(steps[rid])
            if len(chain) < 2:
                continue
            last = len(chain) - 1
            for n, (ts, _rank, _seq, pid, tid) in enumerate(chain):
                phase = "s" if n == 0 else "f" if n == last else "t"
                flow: dict[str, Any] = {
                    "name": FLOW_NAME,
                    "cat": CATEGORY,
                    "ph": phase,
                    "id": rid,
                    "ts": ts,
                    "pid": pid,
                    "tid": tid,
                }
                if phase != "s":
                    flow["bp"] = "e"
                flows.append(flow)
        return {
            "traceEvents": tracks.metadata_events() + complete + flows,
            "displayTimeUnit": "ms",
            "metadata": {
                "generator": f"specdec-sim {__version__}",
                "clock": "simulated time, microseconds",
                "spans": len(spans),
                "followed_requests": "all"
                if self.follow_requests is None
                else sorted(self._followed),
                "max_events": self.max_events,
                "capped": self.capped,
                "spans_left_out": self.dropped,
            },
        }

    def write(self, path: Path) -> None:
        """Write the trace to ``path`` in one step (a temporary file beside it, then renamed)."""
        text = json.dumps(self.document(), separators=(",", ":"), allow_nan=False)
        target = path.absolute()
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        staging = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            staging.chmod(0o666 & ~_umask())
            staging.replace(target)
        except BaseException:
            staging.unlink(missing_ok=True)
            raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _us(time_s: float) -> int:
    """Simulated seconds as whole microseconds (exact in JSON; rounding keeps order)."""
    return round(time_s * 1e6)


def _args(span: Span) -> dict[str, Any]:
    args: dict[str, Any] = {
        "phase": span.phase,
        "batch": len(span.requests),
        "tokens": span.tokens,
        "k": span.k,
    }
    if span.iterations != 1:
        args["iterations"] = span.iterations
    if span.place == "link":
        source = span.owner.split("->", 1)[0]
        args["device"] = f"{source}/{span.owner.rsplit('/', 1)[1]}"
    args["requests"] = list(span.requests[:REQUEST_IDS_IN_ARGS])
    if len(span.requests) > REQUEST_IDS_IN_ARGS:
        args["requests_not_listed"] = len(span.requests) - REQUEST_IDS_IN_ARGS
    return args


def _process(span: Span) -> tuple[tuple[int, int, str], str]:
    """A span's process: its sort key and its name."""
    if span.place == "replica":
        pool, index = span.owner.rsplit("/", 1)
        return (0, int(index), pool), f"pool {pool} / replica {index}"
    if span.place == "device":
        pool = span.owner.rsplit("/", 1)[0]
        return (1, 0, pool), f"drafters {pool}"
    link = span.owner.rsplit("/", 1)[0]
    return (2, 0, link), f"link {link}"


class _Tracks:
    """Assigns processes and tracks (pid, tid) to spans and names them.

    Processes are numbered replicas first (by index), then device classes,
    then links (by name).
    """

    def __init__(self, spans: list[Span]) -> None:
        named = dict(_process(span) for span in spans)
        self.pids = {key: pid for pid, key in enumerate(sorted(named), start=1)}
        self.process_names = {self.pids[key]: name for key, name in named.items()}
        self.threads: dict[tuple[int, int], str] = {}
        self._busy: dict[tuple[int, str], list[tuple[int, int]]] = {}
        self._free: dict[tuple[int, str], list[int]] = {}

    def place(self, span: Span, start_us: int, end_us: int) -> tuple[int, int]:
        """The (pid, tid) of a span; spans must come in start order."""
        pid = self.pids[_process(span)[0]]
        if span.place == "replica":
            tid = _REPLICA_LANES[span.lane]
            name = span.lane
        elif span.place == "device":
            index = int(span.owner.rsplit("/", 1)[1])
            tid = index + 1
            name = f"device {index}"
        else:
            lane = self._link_lane((pid, span.lane), start_us, end_us)
            tid = lane * 2 + (1 if span.lane == "up" else 2)
            name = f"{span.lane} {lane}"
        self.threads.setdefault((pid, tid), name)
        return pid, tid

    def _link_lane(self, key: tuple[int, str], start_us: int, end_us: int) -> int:
        """The lowest track of a link direction free at ``start_us`` (a new one if none is)."""
        busy = self._busy.setdefault(key, [])
        free = self._free.setdefault(key, [])
        while busy and busy[0][0] <= start_us:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else len(busy)
        heapq.heappush(busy, (end_us, lane))
        return lane

    def metadata_events(self) -> list[dict[str, Any]]:
        """``process_name``/``thread_name`` and sort-index events for every pid and tid used."""
        events: list[dict[str, Any]] = []
        for pid in sorted(self.process_names):
            events.append(_meta("process_name", pid, 0, {"name": self.process_names[pid]}))
            events.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))
        for pid, tid in sorted(self.threads):
            events.append(_meta("thread_name", pid, tid, {"name": self.threads[(pid, tid)]}))
            events.append(_meta("thread_sort_index", pid, tid, {"sort_index": tid}))
        return events


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


# -- command line ------------------------------------------------------------
def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--trace-events``, ``--trace-requests`` and ``--trace-max-events`` to ``parser``."""
    parser.add_argument(
        "--trace-events",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the run's timeline as Chrome trace-event JSON "
        "(open it in ui.perfetto.dev or chrome://tracing)",
    )
    parser.add_argument(
        "--trace-requests",
        type=int,
        default=None,
        metavar="N",
        help="timeline: follow only the first N requests to arrive (transfers, "
        "device work, flow arrows); replica iterations are all kept",
    )
    parser.add_argument(
        "--trace-max-events",
        type=int,
        default=None,
        metavar="N",
        help="timeline: stop recording after N events (the file notes that it was capped)",
    )


def timeline_tracer(
    path: Path | None,
    follow_requests: int | None,
    max_events: int | None,
    out_dir: Path,
) -> ChromeTraceTracer | None:
    """The tracer the ``--trace-*`` options ask for (``None`` without ``--trace-events``).

    Refused before the run: a count below 1, a sampling option without
    ``--trace-events``, a file whose directory does not exist or does not
    accept a new entry (checked by creating and removing an empty file
    there), a name that exists but is not a regular file (a directory, a
    device node, a FIFO, a symbolic link: the trace is written beside it and
    renamed over it, which would replace it), or a file inside the results
    directory (which is replaced whole).

    Raises:
        InputError: Naming the option, its value and what is allowed.
    """
    for option, value in (
        ("--trace-requests", follow_requests),
        ("--trace-max-events", max_events),
    ):
        if value is None:
            continue
        if value < 1:
            raise InputError([make_issue(COMMAND_LINE, option, value, "an integer >= 1")])
        if path is None:
            raise InputError(
                [make_issue(COMMAND_LINE, option, value, "only with --trace-events FILE")]
            )
    if path is None:
        return None
    target = path.absolute()

    def refuse(problem: str) -> InputError:
        allowed = (
            "a new or regular file in an existing directory this user can write, "
            "outside the results directory"
        )
        return InputError([make_issue(COMMAND_LINE, "--trace-events", str(path), allowed, problem)])

    if target.is_relative_to(out_dir.absolute()):
        raise refuse(f"lies inside the results directory {out_dir}, which is replaced whole")
    try:
        mode: int | None = target.lstat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise refuse(exc.strerror or str(exc)) from None
    if mode is not None and not stat.S_ISREG(mode):
        raise refuse(f"exists and {_kind(mode)}, not a regular file")
    if not target.parent.is_dir():
        raise refuse(f"{target.parent} is not an existing directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.probe-", dir=target.parent)
        os.close(fd)
        Path(probe).unlink()
    except OSError as exc:
        raise refuse(f"cannot create files in {target.parent}: {exc.strerror}") from None
    return ChromeTraceTracer(follow_requests, max_events)


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, as ``is a ...``."""
    kinds = (
        (stat.S_ISDIR, "is a directory"),
        (stat.S_ISLNK, "is a symbolic link"),
        (stat.S_ISCHR, "is a character device"),
        (stat.S_ISBLK, "is a block device"),
        (stat.S_ISFIFO, "is a FIFO"),
        (stat.S_ISSOCK, "is a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "is a special file")
