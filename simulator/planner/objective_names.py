"""The names of the planner's objectives (no imports: the scenario's checks read them)."""

from __future__ import annotations

OBJECTIVES = (
    "goodput",
    "p95_tpot",
    "p95_ttft",
    "p95_tvt",
    "energy",
    "cost",
    "goodput_at_slo_floor",
    "gpus_at_slo_floor",
)
"""Every objective; goodput is higher-better, the others lower-better (the two
``*_at_slo_floor`` ones first rank by the SLO-attainment floor)."""

FLOOR_OBJECTIVES = ("goodput_at_slo_floor", "gpus_at_slo_floor")
"""The objectives subject to ``planner.slo_floor``."""

LEADING_OBJECTIVES = ("goodput", *FLOOR_OBJECTIVES)
"""The objectives a planner's list may start with (the one its decisions weigh)."""
