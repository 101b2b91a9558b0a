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

MAX_TRACE_ROWS = 10_000_000
"""Data rows read from one trace file.

A source trace is read only up to the end of its slice (``start_s``,
``duration_s``, ``max_requests``), so this bounds a file read whole: an
``empirical`` length distribution, a lengths-only file, or a slice deep into
a long file. Reading costs about 40 bytes a row once parsed and a few seconds
per million rows, so the limit keeps a read under a minute and a GB."""
