"""The workload manager: where a run's requests come from.

A scenario's ``workload`` section names a trace to replay (``trace://...``) or
a synthetic generator, plus SLO classes and how requests are attributed to
client device classes. :func:`build_workload_spec` checks the section and reads
its trace files into a frozen :class:`WorkloadSpec`;
:func:`generate_requests` turns that into the run's :class:`RequestTable`;
:func:`simulator.workload.run_requests.build_requests` does so for a loaded
scenario (its seed and client classes) and refuses a table a run may not
hold. Nothing here imports :mod:`simulator.scenario`, which imports this
package.
The section's reference is ``docs/workload.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.lazy_exports import lazy_getattr
from simulator.workload.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    OnOffArrivals,
    PoissonArrivals,
    mean_rate_per_s,
    sample_arrivals,
)
from simulator.workload.build import build_workload_spec, check_workload_section
from simulator.workload.distributions import (
    EmpiricalLength,
    FixedLength,
    LengthDistribution,
    LognormalLength,
    UniformLength,
    sample_length_pairs,
)
from simulator.workload.generate import generate_requests
from simulator.workload.origins import ORIGIN_RULES, OriginRule, assign_origins
from simulator.workload.requests import RequestTable
from simulator.workload.slo import DEFAULT_CLASS, SloTargets
from simulator.workload.spec import SyntheticSource, TraceSource, WorkloadSpec
from simulator.workload.trace_formats import FORMAT_CHOICES, TRACE_FORMATS, detect_format
from simulator.workload.trace_table import TraceTable

if TYPE_CHECKING:
    from simulator.workload.trace_readers import load_trace, read_trace

__all__ = [
    "DEFAULT_CLASS",
    "FORMAT_CHOICES",
    "ORIGIN_RULES",
    "TRACE_FORMATS",
    "ArrivalProcess",
    "EmpiricalLength",
    "FixedLength",
    "GammaArrivals",
    "LengthDistribution",
    "LognormalLength",
    "OnOffArrivals",
    "OriginRule",
    "PoissonArrivals",
    "RequestTable",
    "SloTargets",
    "SyntheticSource",
    "TraceSource",
    "TraceTable",
    "UniformLength",
    "WorkloadSpec",
    "assign_origins",
    "build_workload_spec",
    "check_workload_section",
    "detect_format",
    "generate_requests",
    "load_trace",
    "mean_rate_per_s",
    "read_trace",
    "sample_arrivals",
    "sample_length_pairs",
]


__getattr__ = lazy_getattr(
    "simulator.workload",
    # The trace readers need pandas for files their fast path does not read.
    dict.fromkeys(("load_trace", "read_trace"), "simulator.workload.trace_readers"),
)
