"""Build the performance lookup tables in ``lut/`` from committed measurements.

The package turns the real measurements copied into ``lut_population/inputs``
(Vidur operator profiles, ML.ENERGY power, DistServe fits, consumer-device
benchmarks, the project's own H100 measurements) into the LUT CSV files the
simulator reads (``lut/microbench/`` holds the ones built from the H100
measurements), with a provenance
catalog, sanity checks and regression detection. Run it as::

    python -m lut_population build          # regenerate lut/*.csv and lut/CATALOG.md
    python -m lut_population check          # sanity and spot checks; non-zero exit on failure
    python -m lut_population diff OLD NEW   # rows that moved by more than 5 %
    python -m lut_population profile --model llama-3-8b --hardware my-gpu   # measure on your GPU

See ``lut_population/PLAN.md`` for the workflow and every formula.
"""

from __future__ import annotations

GENERATOR_VERSION = "1.0.0"
"""Version of the generator, written into every catalog entry."""

BUILD_DATE = "2026-11-22"
"""Fixed build date written into the catalog, so that builds are byte-identical."""
