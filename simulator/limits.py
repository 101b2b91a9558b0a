"""Sizes and ranges an input may have: beyond them it is refused before any work starts.

The size limits keep a run within a few GB of memory. Measured on the fixture
scenarios of the test suite (CPython 3.10, 64-bit): about 2.2 kB per request
(its generated row, its state while simulated, its result row) and about
40 kB per target replica (its lanes, KV ledger and time-series rows of a
five-minute run). The others bound the work of searches, sweeps and the
planner, the rows read from a trace, and the values that could make a sum
overflow to ``inf``. (A bound on one value that JSON Schema can state, such
as ``network.links[].rtt_ms``, is in the schema, its reason in the key's
description.)
"""

from __future__ import annotations

MAX_REQUESTS = 1_000_000
"""Requests per run (about 2.2 GB at the limit)."""

MAX_TARGET_REPLICAS = 4_096
"""Target replicas per scenario, all target classes together (about 160 MB)."""

MAX_DEVICE_COUNT = 1_000_000_000
"""``hardware_profiles[].count`` of one class (client devices are made only when used)."""

MAX_ARRIVAL_S = 1e15
"""Latest arrival time of a run, after slicing and ``arrival_scale`` (about 32 million years).

Far beyond any trace or study, and small enough that every total a run forms
from it (GPU-hours of 4,096 replicas, idle energy at a megawatt, a price of a
million dollars an hour) stays a finite number."""

MIN_SEARCH_TOLERANCE = 1e-6
"""Smallest ``--tolerance`` of the capacity bisection (``simulate capacity``, ``simulate plan``).

Each probe is a whole run, and a rate known to a millionth is far finer than
the run-to-run noise of any scenario; much below it ``1 + tolerance`` rounds
to 1 in binary64 (1 + 1e-16 == 1) and the bisection would never end."""

MAX_BISECTION_STEPS = 40
"""Most probes the capacity bisection runs between ``--low`` and ``--high``.

A hard stop besides the tolerance: at :data:`MIN_SEARCH_TOLERANCE` even the
widest finite bounds (1e-300 to 1e300) need 31 halvings."""

MAX_TRACE_ROWS = 5_000_000
"""Data rows read from one trace file.

A source trace is read only up to the end of its slice (``start_s``,
``duration_s``, ``max_requests``), so this bounds a file read whole: an
``empirical`` length distribution, a lengths-only file, or a slice deep into
a long file. Measured on a 10-million-line JSONL trace: about 4.5 s of CPU
and 120 MB at the peak per million rows (CSV reads faster), so a read at the
limit stays well under a minute and a GB."""

MAX_LUT_LATENCY_MS = 1e9
"""Largest ``latency_ms`` of one LUT row: a million seconds (11.6 days) for one iteration.

Measured iterations take milliseconds to minutes (the shipped tables stay
below 600 s, even at their largest batches and contexts); the bound keeps
every time a run adds up (iterations of up to 10 million tokens, a million
requests) far from overflowing to ``inf``, as a latency of 1e308 ms did."""

MAX_LUT_ENERGY_MJ = 1e14
"""Largest ``energy_mj`` of one LUT row: 100 kW (a full node) for the longest iteration."""

MAX_LUT_MEMORY_MB = 1e9
"""Largest ``peak_mem_mb`` and ``kv_delta_mb`` of one LUT row: a petabyte."""

MAX_LUT_WHOLE_NUMBER = 1_000_000_000
"""Largest value of a whole-number LUT column (tokens, sequences, k, parallel degrees):
far above any real grid, and exact in the floats the cells are parsed as."""

LUT_MAXIMA: dict[str, float] = {
    "latency_ms": MAX_LUT_LATENCY_MS,
    "energy_mj": MAX_LUT_ENERGY_MJ,
    "peak_mem_mb": MAX_LUT_MEMORY_MB,
    "kv_delta_mb": MAX_LUT_MEMORY_MB,
}
"""The number columns of a LUT with an upper bound (whole-number columns: :data:`MAX_LUT_WHOLE_NUMBER`)."""

MAX_PLANNER_CANDIDATES = 1_024
"""Candidates of the online planner: the product of the lengths of the
``planner.candidates`` lists. With ``search: grid`` each one is a what-if
window (a short run) every round."""

MIN_PLANNER_INTERVAL_S = 1.0
"""Smallest ``planner.interval_s``. Replicas load in seconds to minutes and a
round's statistics come from the arrivals of the last ``window_s``: rounds
more often than once a simulated second only repeat work (every round runs a
window per candidate, also after the last arrival while requests are left)."""

MAX_PLANNER_WINDOW_RATIO = 100
"""Largest ``planner.window_s`` as a multiple of ``planner.interval_s``: each
round replays the arrivals of the last ``window_s`` seconds for every
candidate, so each request is replayed about ``window_s / interval_s`` times
per candidate."""

MAX_PLANNER_WINDOWS = 20_000
"""What-if windows per run: rounds (the arrivals' span, up to
``simulation.until_s``, over ``interval_s``) times the windows of a round. A
window replaying about a hundred requests takes about 50 ms (measured on the
planner tests' scenario), so the planner's work stays within a quarter of an
hour. Checked when the run's requests are made, before it starts."""

MAX_CLOSED_LOOP_USERS = MAX_REQUESTS
"""``workload.closed_loop.users``: each user holds at most one request, and a
run holds at most :data:`MAX_REQUESTS`; every user is scheduled at the start."""

MAX_SWEEP_POINTS = 1_000
"""Points of a sweep (the product of a grid's axis lengths, or the ``points``
listed). Every point is loaded and checked before any runs (about 0.1 s
each), then run: a larger study is several sweeps."""

MAX_PLAN_CONFIGURATIONS = 256
"""Configurations of a plan space (the product of its axis lengths). Each is
a capacity search of up to :data:`MAX_BISECTION_STEPS` + 2 runs."""
