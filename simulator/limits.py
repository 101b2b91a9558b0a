"""Sizes a run may have: beyond them a scenario is refused before it starts.

The limits keep a run within a few GB of memory. Measured on the fixture
scenarios of the test suite (CPython 3.10, 64-bit): about 2.2 kB per request
(its generated row, its state while simulated, its result row) and about
40 kB per target replica (its lanes, KV ledger and time-series rows of a
five-minute run).
"""

from __future__ import annotations

MAX_REQUESTS = 1_000_000
"""Requests per run (about 2.2 GB at the limit)."""

MAX_TARGET_REPLICAS = 4_096
"""Target replicas per scenario, all target classes together (about 160 MB)."""

MAX_DEVICE_COUNT = 1_000_000_000
"""``hardware_profiles[].count`` of one class (client devices are made only when used)."""

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
