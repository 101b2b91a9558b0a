"""Defaults of the capacity and placement searches (light: the command line reads them for its help)."""

from __future__ import annotations

DEFAULT_LOW = 0.1
"""Lowest ``arrival_scale`` tried (configuration: a tenth of the scenario's rate)."""
DEFAULT_HIGH = 10.0
"""Highest ``arrival_scale`` tried (configuration: ten times the scenario's rate)."""
DEFAULT_TOLERANCE = 0.05
"""Bisection stops when the failing scale is within this fraction above the passing one."""
DEFAULT_SLO_ATTAINMENT = 0.9
"""Share of requests that must meet every SLO: DistServe's attainment target
(Zhong et al., OSDI 2024)."""
