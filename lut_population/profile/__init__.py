"""Measure LUT rows of a Llama-architecture model on your own GPU.

``python -m lut_population profile`` builds the model in PyTorch with random
fp16 weights, times its prefill, decode, verify and EAGLE-style head steps as
CUDA graphs, and writes the medians as LUT rows (``source: microbench...``) in
the format of ``lut/README.md``. PyTorch is an optional extra
(``pip install 'specdec-sim[profile]'``); nothing in this package imports it
until a measurement runs (:mod:`lut_population.profile.torch_model` and
:mod:`lut_population.profile.cuda_timing` are the only modules that do).

Modules:

* :mod:`~lut_population.profile.model_input`: the model shape (a ``models.yaml``
  id or a Hugging Face ``config.json``).
* :mod:`~lut_population.profile.points`: the grid to measure and the memory rule.
* :mod:`~lut_population.profile.timing`: the timing protocol and statistics.
* :mod:`~lut_population.profile.runner`: measures every grid point.
* :mod:`~lut_population.profile.writer`: LUT rows and CSV text.
* :mod:`~lut_population.profile.cli`: the ``profile`` subcommand.

See "Profiling your own GPU" in ``lut_population/PLAN.md``.
"""

from __future__ import annotations

PROFILER_VERSION = "profile_v1"
"""Version tag of the profiler, part of every row's ``source``."""
