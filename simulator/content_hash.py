"""The content hash of a resolved scenario: what a results directory was computed from."""

from __future__ import annotations

import hashlib
import json

from simulator import __version__
from simulator.scenario.model import Scenario


def scenario_sha256(scenario: Scenario) -> str:
    """Return the SHA-256 of the resolved scenario and the package version.

    The hash covers the canonical JSON (sorted keys, no spaces) of the
    document ``scenario.resolved.yaml`` holds and the ``specdec-sim`` version
    that ran it. It does not cover the content of the files the scenario
    names (device profiles, LUTs, acceptance curves, traces), only their
    absolute paths.
    """
    canonical = json.dumps(
        {"scenario": scenario.resolved(), "specdec_sim_version": __version__},
        sort_keys=True,
        separators=(",", ":"),
        allow_nan=False,
        ensure_ascii=True,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
