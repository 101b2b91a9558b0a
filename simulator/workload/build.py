"""Building a :class:`WorkloadSpec` from a scenario's ``workload`` section.

:func:`build_workload_spec` takes the section after schema validation and
default filling, reads the trace files it names and runs every check the
schema cannot express. It never raises for bad input: it returns all the
problems as issues. Key paths start with ``workload.``; problems inside a
trace file (``row N, column C``) name the trace file instead of the scenario.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simulator.builtin_data import ALLOWED as ALLOWED_BUILTIN
from simulator.builtin_data import unknown_builtin
from simulator.errors import Issue, make_issue
from simulator.input_files import file_problem
from simulator.limits import MAX_CLOSED_LOOP_USERS, MAX_REQUESTS
from simulator.loading import fill_defaults, load_packaged_schema, resolve_path, schema_issues
from simulator.workload.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    OnOffArrivals,
    PoissonArrivals,
    mean_rate_per_s,
)
from simulator.workload.categories import CATEGORY_NAME
from simulator.workload.closed_loop import (
    ClosedLoop,
    ExponentialThinkTime,
    FixedThinkTime,
    ThinkTime,
)
from simulator.workload.distributions import (
    EmpiricalLength,
    FixedLength,
    LengthDistribution,
    LognormalLength,
    UniformLength,
)
from simulator.workload.issue_collector import row_key
from simulator.workload.origins import OriginRule
from simulator.workload.slo import DEFAULT_CLASS, SloTargets
from simulator.workload.spec import (
    Sessions,
    SharedPrefix,
    SyntheticSource,
    TraceSource,
    WorkloadSpec,
)
from simulator.workload.trace_stop import TraceStop
from simulator.workload.trace_table import TraceTable

SCHEMA_NAME = "workload.schema.json"
SECTION = "workload"
TRACE_PREFIX = "trace://"
SYNTHETIC = "synthetic"
MIN_LOGNORMAL_MASS = 1e-12
"""A lognormal whose [min, max] holds less probability than this is rejected."""


class _Builder:
    """Collects issues while turning the section into frozen objects."""

    def __init__(self, section: Mapping[str, Any], scenario_file: Path) -> None:
        self.doc: dict[str, Any] = fill_defaults(dict(section), load_packaged_schema(SCHEMA_NAME))
        self.file = scenario_file
        self.base = scenario_file.parent
        self.issues: list[Issue] = []
        self._traces: dict[
            tuple[Path, str, TraceStop | None], tuple[TraceTable | None, list[Issue]]
        ] = {}

    def issue(self, key: str, value: object, allowed: str, problem: str) -> None:
        self.issues.append(make_issue(self.file, f"{SECTION}.{key}", value, allowed, problem))

    # -- trace files ---------------------------------------------------------
    def trace(
        self, name: str, fmt: str, key: str, stop: TraceStop | None = None
    ) -> TraceTable | None:
        """Read a trace named in the section (once per file, format and slice read)."""
        path = resolve_path(self.base, name)
        if (path, fmt, stop) not in self._traces:
            from simulator.workload.trace_readers import load_trace  # pandas: only for traces

            self._traces[(path, fmt, stop)] = load_trace(path, fmt, stop)
            table, found = self._traces[(path, fmt, stop)]
            unknown = unknown_builtin(name)
            if unknown is not None:
                self.issue(key, name, ALLOWED_BUILTIN, unknown)
                return None
            problem = file_problem(path)
            if problem is not None:
                self.issue(
                    key,
                    name,
                    "an existing trace file (paths are relative to the scenario file)",
                    f"trace file {problem}: {path}",
                )
                return None
            for issue in found:
                if issue.key_path in ("", "format"):
                    self.issue(key, name, issue.allowed, f"{issue.problem} ({path}: {issue.value})")
                else:
                    self.issues.append(issue)
            return table
        return self._traces[(path, fmt, stop)][0]

    # -- pieces --------------------------------------------------------------
    def slo(self, raw: Mapping[str, Any]) -> SloTargets:
        tvt = raw.get("tvt_ms")
        return SloTargets(
            float(raw["ttft_ms"]), float(raw["tpot_ms"]), None if tvt is None else float(tvt)
        )

    def slo_classes(self) -> dict[str, SloTargets]:
        classes = {DEFAULT_CLASS: self.slo(self.doc["slo"])}
        for name, raw in self.doc["slo_classes"].items():
            if name == DEFAULT_CLASS:
                self.issue(
                    f"slo_classes.{name}",
                    name,
                    "any other class name (the default class is workload.slo)",
                    "the default class cannot be redefined here",
                )
                continue
            classes[name] = self.slo(raw)
        return classes

    def origin(self) -> OriginRule | None:
        raw = self.doc["origin"]
        rule = raw["rule"]
        weights = tuple((str(k), float(v)) for k, v in raw["weights"].items())
        if rule == "weights" and not weights:
            self.issue(
                "origin.weights",
                {},
                "a mapping of client device class id -> weight > 0",
                "rule weights needs at least one weight",
            )
            return None
        if rule != "weights" and weights:
            self.issue(
                "origin.weights",
                dict(raw["weights"]),
                "{} (weights apply only with rule: weights)",
                f"weights given with rule {rule}",
            )
            return None
        return OriginRule(rule, weights)

    def distribution(
        self, raw: Mapping[str, Any], key: str, column: str
    ) -> LengthDistribution | None:
        kind = raw["dist"]
        if kind == "fixed":
            return FixedLength(int(raw["value"]))
        if kind == "uniform":
            low, high = int(raw["low"]), int(raw["high"])
            if high < low:
                self.issue(f"{key}.high", high, f"an integer >= low ({low})", "high is below low")
                return None
            return UniformLength(low, high)
        if kind == "lognormal":
            return self.lognormal(raw, key)
        table = self.trace(str(raw["trace"]), str(raw.get("format", "auto")), f"{key}.trace")
        if table is None:
            return None
        values, partner = (
            (table.prompt_tokens, table.output_tokens)
            if column == "prompt_tokens"
            else (table.output_tokens, table.prompt_tokens)
        )
        return EmpiricalLength(values, table.path, table.format, column, partner)

    def lognormal(self, raw: Mapping[str, Any], key: str) -> LognormalLength | None:
        low = int(raw.get("min", 1))
        high = raw.get("max")
        if high is not None and int(high) < low:
            self.issue(f"{key}.max", high, f"an integer >= min ({low}) or null", "max is below min")
            return None
        dist = LognormalLength(
            float(raw["median"]), float(raw["sigma"]), low, None if high is None else int(high)
        )
        if not dist.mass() >= MIN_LOGNORMAL_MASS:
            self.issue(
                key,
                dict(raw),
                "a [min, max] range holding a usable share of the distribution",
                f"[min, max] holds a probability of only {dist.mass():.3g}",
            )
            return None
        return dist

    def arrival(self, raw: Mapping[str, Any]) -> ArrivalProcess:
        rate = float(raw["rate_per_s"])
        if raw["process"] == "gamma":
            return GammaArrivals(rate, float(raw["cv"]))
        if raw["process"] == "on_off":
            return OnOffArrivals(rate, float(raw["on_s"]), float(raw["off_s"]))
        return PoissonArrivals(rate)

    def synthetic_arrival(self, raw: Mapping[str, Any]) -> ArrivalProcess | None:
        """The synthetic arrival process: required in open loop, refused in closed loop."""
        given = raw.get("arrival")
        if self.doc["closed_loop"] is None:
            if given is None:
                self.issue(
                    f"{SYNTHETIC}.arrival",
                    "(missing)",
                    "an arrival process ({process: poisson, rate_per_s}, gamma or on_off)",
                    "an open-loop synthetic workload needs an arrival process",
                )
                return None
            return self.arrival(given)
        if given is not None:
            self.issue(
                f"{SYNTHETIC}.arrival",
                dict(given),
                "no arrival process with closed_loop",
                "closed_loop users send each request when their previous one ends; "
                "an arrival process would be ignored",
            )
        if raw.get("duration_s") is not None:
            self.issue(
                f"{SYNTHETIC}.duration_s",
                raw["duration_s"],
                "synthetic.num_requests with closed_loop (end the run at a time with "
                "simulation.until_s)",
                "closed_loop has no arrival process to generate arrivals in a duration",
            )
        return None

    def closed_loop(self) -> ClosedLoop | None:
        raw = self.doc["closed_loop"]
        if raw is None:
            return None
        if self.doc["arrival_scale"] != 1.0:
            self.issue(
                "arrival_scale",
                self.doc["arrival_scale"],
                "1.0 (the default) with closed_loop",
                "closed_loop users decide when requests are sent; arrival_scale would be ignored "
                "(change closed_loop.users or closed_loop.think_time_s instead)",
            )
        think = raw["think_time_s"]
        think_time: ThinkTime = (
            ExponentialThinkTime(float(think["mean_s"]))
            if isinstance(think, Mapping)
            else FixedThinkTime(float(think))
        )
        if int(raw["users"]) > MAX_CLOSED_LOOP_USERS:
            self.issue(
                "closed_loop.users",
                raw["users"],
                f"at most {MAX_CLOSED_LOOP_USERS:,} users (each holds at most one request, and "
                "a run at most that many requests)",
                "too many users",
            )
        return ClosedLoop(int(raw["users"]), think_time)

    # -- sources -------------------------------------------------------------
    def synthetic(self, classes: Mapping[str, SloTargets]) -> SyntheticSource | None:
        raw = self.doc.get(SYNTHETIC)
        if raw is None:
            self.issue(
                SYNTHETIC,
                "(missing)",
                "a synthetic block (arrival, prompt_tokens, output_tokens, num_requests or duration_s)",
                "source is synthetic but the synthetic block is missing",
            )
            return None
        for key in (
            "format",
            "start_s",
            "duration_s",
            "prompt_length_override",
            "output_length_override",
        ):
            default = {"format": "auto", "start_s": 0.0}.get(key)
            if self.doc.get(key) != default:
                self.issue(
                    key,
                    self.doc[key],
                    f"{default!r} (the default) with a synthetic source",
                    f"{key} applies only to trace sources"
                    + ("; use synthetic.duration_s" if key == "duration_s" else "")
                    + (
                        "; set synthetic.prompt_tokens / output_tokens" if "override" in key else ""
                    ),
                )
        count, duration = raw.get("num_requests"), raw.get("duration_s")
        if (count is None) == (duration is None):
            self.issue(
                SYNTHETIC,
                {"num_requests": count, "duration_s": duration},
                "exactly one of num_requests and duration_s",
                "both given" if count is not None else "neither given",
            )
        mix = tuple((str(k), float(v)) for k, v in raw["slo_class_mix"].items())
        for name, _ in mix:
            if name not in classes:
                self.issue(
                    f"{SYNTHETIC}.slo_class_mix.{name}",
                    name,
                    "default or a key of workload.slo_classes: " + ", ".join(sorted(classes)),
                    "undeclared SLO class",
                )
        prompt = self.distribution(
            raw["prompt_tokens"], f"{SYNTHETIC}.prompt_tokens", "prompt_tokens"
        )
        output = self.distribution(
            raw["output_tokens"], f"{SYNTHETIC}.output_tokens", "output_tokens"
        )
        arrival = self.synthetic_arrival(raw)
        if arrival is not None and duration is not None:
            expected = mean_rate_per_s(arrival) * float(duration)
            if expected > MAX_REQUESTS:
                self.issue(
                    f"{SYNTHETIC}.duration_s",
                    duration,
                    f"a duration in which at most {MAX_REQUESTS:,} requests are expected to arrive "
                    "(the limit of requests per run)",
                    f"{expected:.3g} requests expected at the arrival rate",
                )
        sessions = self.sessions(raw, arrival, count, duration)
        if self.issues or prompt is None or output is None:
            return None
        return SyntheticSource(
            arrival=arrival,
            prompt_tokens=prompt,
            output_tokens=output,
            num_requests=None if count is None else int(count),
            duration_s=None if duration is None else float(duration),
            slo_class_mix=mix,
            category_mix=tuple((str(k), float(v)) for k, v in raw["category_mix"].items()),
            shared_prefix=None
            if raw.get("shared_prefix") is None
            else SharedPrefix(
                int(raw["shared_prefix"]["tokens"]), float(raw["shared_prefix"]["fraction"])
            ),
            sessions=sessions,
        )

    def sessions(
        self,
        raw: Mapping[str, Any],
        arrival: ArrivalProcess | None,
        count: int | None,
        duration: float | None,
    ) -> Sessions | None:
        """``synthetic.sessions``: multi-turn sessions, refused where they cannot run."""
        given = raw.get("sessions")
        if given is None:
            return None
        key = f"{SYNTHETIC}.sessions"
        if self.doc["closed_loop"] is not None:
            self.issue(
                key,
                dict(given),
                "null with closed_loop",
                "a session's turns arrive a think time after the previous turn's arrival "
                "(open loop); closed_loop users send each request when their previous one ends",
            )
            return None
        if raw.get("shared_prefix") is not None:
            self.issue(
                key,
                dict(given),
                "null with shared_prefix (or shared_prefix null)",
                "a session's prompts start with its own conversation; a system prompt in front "
                "of them is not modelled",
            )
            return None
        turns_raw = given["turns"]
        turns: FixedLength | UniformLength
        if isinstance(turns_raw, Mapping):
            low, high = int(turns_raw["low"]), int(turns_raw["high"])
            if high < low:
                self.issue(
                    f"{key}.turns.high", high, f"an integer >= low ({low})", "high is below low"
                )
                return None
            turns = UniformLength(low, high)
            most = high
        else:
            turns = FixedLength(int(turns_raw))
            most = int(turns_raw)
        if arrival is not None and (count is not None or duration is not None):
            sessions = (
                float(count)
                if count is not None
                else mean_rate_per_s(arrival) * float(duration or 0)
            )
            if sessions * most > MAX_REQUESTS:
                self.issue(
                    f"{key}.turns",
                    turns_raw,
                    f"at most {MAX_REQUESTS:,} requests in all: sessions ({sessions:.3g}"
                    f"{'' if count is not None else ' expected'}) times the most turns",
                    "too many requests",
                )
                return None
        think = given["think_time_s"]
        think_time: ThinkTime = (
            ExponentialThinkTime(float(think["mean_s"]))
            if isinstance(think, Mapping)
            else FixedThinkTime(float(think))
        )
        return Sessions(turns, think_time)

    def trace_source(self, name: str, classes: Mapping[str, SloTargets]) -> TraceSource | None:
        if self.doc.get(SYNTHETIC) is not None:
            self.issue(
                SYNTHETIC,
                "(a synthetic block)",
                "no synthetic block when source is a trace",
                "synthetic is only allowed with source: synthetic",
            )
        start = float(self.doc["start_s"])
        duration = self.doc["duration_s"]
        count = self.doc["max_requests"]
        # Read only up to the end of the slice; without max_requests, one row
        # more than a run may hold is enough to refuse the slice.
        cap = MAX_REQUESTS + 1 if count is None else min(int(count), MAX_REQUESTS + 1)
        stop = TraceStop(start, None if duration is None else start + float(duration), cap)
        table = self.trace(name, str(self.doc["format"]), "source", stop)
        if table is None:
            return None
        if table.arrival_s is None:
            self.issue(
                "source",
                TRACE_PREFIX + name,
                "a trace with arrival times (azure, mooncake, csv/jsonl with arrival_s)",
                f"{table.path} (format {table.format}) has no arrival times; "
                "use it as a length distribution (dist: empirical)",
            )
            return None
        self.check_trace_classes(table, classes)
        self.check_trace_categories(table)
        span = table.span_s()
        if start > span:
            self.issue(
                "start_s",
                start,
                f"0 <= start_s <= {span:g} (the trace's span in seconds)",
                "the slice starts after the trace's last arrival",
            )
            return None
        source = TraceSource(table, start, None if duration is None else float(duration))
        if len(source.sliced()) == 0:
            end = math.inf if duration is None else start + float(duration)
            self.issue(
                "duration_s",
                duration,
                "a slice holding at least one arrival",
                f"no request arrives in [{start:g}, {end:g}) s of the trace",
            )
            return None
        if len(source.sliced(cap)) > MAX_REQUESTS:
            self.issue(
                "max_requests",
                count,
                f"at most {MAX_REQUESTS:,} requests per run: set workload.max_requests, or "
                "slice the trace with start_s and duration_s",
                f"the trace slice holds more than {MAX_REQUESTS:,} requests",
            )
            return None
        return source

    def check_trace_classes(self, table: TraceTable, classes: Mapping[str, SloTargets]) -> None:
        if table.slo_class is None:
            return
        seen: set[str] = set()
        for index, name in enumerate(table.slo_class.tolist()):
            if name and name not in classes and name not in seen:
                seen.add(name)
                self.issues.append(
                    make_issue(
                        table.path,
                        row_key(table.row_of(index), "slo_class"),
                        name,
                        "default or a key of workload.slo_classes: " + ", ".join(sorted(classes)),
                        "undeclared SLO class (first row naming it)",
                    )
                )

    def check_trace_categories(self, table: TraceTable) -> None:
        if table.category is None:
            return
        seen: set[str] = set()
        for index, name in enumerate(table.category.tolist()):
            if name and name not in seen and not CATEGORY_NAME.fullmatch(name):
                seen.add(name)
                self.issues.append(
                    make_issue(
                        table.path,
                        row_key(table.row_of(index), "category"),
                        name,
                        "a task category of lower-case letters, digits and underscores "
                        "(e.g. math, multi_turn), or empty for none",
                        "malformed category (first row naming it)",
                    )
                )

    def overrides(self) -> tuple[LengthDistribution | None, LengthDistribution | None]:
        out: list[LengthDistribution | None] = []
        for key, column in (
            ("prompt_length_override", "prompt_tokens"),
            ("output_length_override", "output_tokens"),
        ):
            raw = self.doc.get(key)
            out.append(None if raw is None else self.distribution(raw, key, column))
        return out[0], out[1]

    def build(self) -> WorkloadSpec | None:
        source_text = str(self.doc["source"])
        classes = self.slo_classes()
        origin = self.origin()
        closed_loop = self.closed_loop()
        source: TraceSource | SyntheticSource | None
        prompt_override: LengthDistribution | None = None
        output_override: LengthDistribution | None = None
        if source_text == SYNTHETIC:
            source = self.synthetic(classes)
        elif source_text.startswith(TRACE_PREFIX) and len(source_text) > len(TRACE_PREFIX):
            source = self.trace_source(source_text[len(TRACE_PREFIX) :], classes)
            prompt_override, output_override = self.overrides()
        else:
            self.issue(
                "source",
                source_text,
                "synthetic or trace://<path relative to the scenario file>",
                "unknown source",
            )
            source = None
        if self.issues or source is None or origin is None:
            return None
        return WorkloadSpec(
            source=source,
            slo_classes=classes,
            origin=origin,
            max_requests=None
            if self.doc["max_requests"] is None
            else int(self.doc["max_requests"]),
            arrival_scale=float(self.doc["arrival_scale"]),
            prompt_length_override=prompt_override,
            output_length_override=output_override,
            closed_loop=closed_loop,
        )


def build_workload_spec(
    section: Mapping[str, Any], scenario_file: Path
) -> tuple[WorkloadSpec | None, list[Issue]]:
    """Build the workload of a scenario from its (schema-valid) ``workload`` section.

    Args:
        section: The section after schema validation (missing defaults are
            filled again here, so a hand-written valid section works too).
        scenario_file: The scenario file; trace paths resolve against its folder.

    Returns:
        ``(spec, [])`` when the section and its trace files are usable,
        otherwise ``(None, issues)`` with every problem found.
    """
    builder = _Builder(section, scenario_file)
    spec = builder.build()
    if builder.issues:
        return None, builder.issues
    return spec, []


def check_workload_section(
    section: Any, scenario_file: Path
) -> tuple[WorkloadSpec | None, list[Issue]]:
    """Validate a ``workload`` section against its schema, then build it.

    For scripts and tests that handle the section on its own; the scenario
    loader validates the whole scenario and calls :func:`build_workload_spec`.
    Key paths of schema problems also start with ``workload.``.
    """
    wrapper = {
        "type": "object",
        "properties": {SECTION: load_packaged_schema(SCHEMA_NAME)},
        "required": [SECTION],
    }
    issues = schema_issues({SECTION: section}, wrapper, scenario_file)
    if issues:
        return None, issues
    return build_workload_spec(section, scenario_file)
