"""Scenario files: schema, loading pipeline and the frozen objects they become.

Module map (what each module checks or builds, and what it may import;
every module may import :mod:`simulator.errors`, :mod:`simulator.limits`,
:mod:`simulator.loading` and the data layer: ``lut``, ``devices``,
``acceptance``, ``workload``):

* :mod:`~simulator.scenario.schema`: the assembled JSON Schema (policy
  parameter schemas from :mod:`policies`).
* :mod:`~simulator.scenario.model`: the frozen dataclasses a scenario
  becomes; imports no other scenario module.
* :mod:`~simulator.scenario.load`: the pipeline file → overrides → schema →
  defaults → :func:`~simulator.scenario.build.build_scenario`; imports
  ``overrides``, ``schema``, ``build``, ``model``.
* :mod:`~simulator.scenario.overrides`: ``--set key=value`` edits of the raw
  document.
* :mod:`~simulator.scenario.build`: the coordinator. It runs the section
  modules in a fixed order over one shared context (so issues keep their
  order), assembles the :class:`Scenario` and, with
  ``simulation.lut_out_of_range: raise``, builds the request table and runs
  ``reach``; imports ``sections.*``, ``requests``, ``reach``, ``model``.
* :mod:`~simulator.scenario.sections.context`: ``BuildContext``, the
  document, the issue list and the answers that depend on several sections
  (LUT phases needed, whether rounds split into lanes, multi-model draft
  classes); imports ``schema`` only.
* :mod:`~simulator.scenario.sections.policy_choice`: a policy by name or
  consented import path, its parameters checked and built.
* :mod:`~simulator.scenario.sections.devices`: ``hardware_profiles``
  (profiles, the models each class runs, availability, replica totals).
* :mod:`~simulator.scenario.sections.network`: ``network`` (links, jitter,
  payload) and every client class linked to a target.
* :mod:`~simulator.scenario.sections.models`: ``speculation`` model lists
  and acceptance curves, LUTs loaded, LUT rows for every device.
* :mod:`~simulator.scenario.sections.speculation`: ``speculation`` mode,
  draft lengths, k controller and hybrid policy.
* :mod:`~simulator.scenario.sections.tree`: ``speculation.tree`` (the
  token-tree shape of fused rounds and its LUTs).
* :mod:`~simulator.scenario.sections.scheduler`: ``scheduler`` lanes,
  routing, admission, arbitration, drafter selection and the KV guard.
* :mod:`~simulator.scenario.sections.lanes`: ``scheduler.lanes`` (the
  split-round settings of lane arbitration rules and their LUTs).
* :mod:`~simulator.scenario.sections.planner`: ``planner``; uses
  ``planner_bounds``.
* :mod:`~simulator.scenario.sections.disaggregated_planner`:
  ``planner`` with prefill and decode pools (the split candidates
  ``prefill_replicas`` / ``decode_replicas`` and what such a planner refuses).
* :mod:`~simulator.scenario.sections.tensor_parallel`:
  ``planner.candidates.tensor_parallel`` (each target pool's class at every
  listed degree; the LUT check comes from ``build`` as a function).
* :mod:`~simulator.scenario.sections.run_settings`: ``metadata``,
  ``metrics``, ``simulation`` and ``workload``.

Each section module imports ``model``, ``sections.context`` and (for
policies) ``sections.policy_choice``, never another section module: what
two sections both need is answered by the context.

* :mod:`~simulator.scenario.planner_bounds`: bounds on the planner's work;
  imports ``model``.
* :mod:`~simulator.scenario.requests`: the run's request table, built once
  (:func:`simulator.workload.run_requests.build_requests`) and bounded by the
  planner's what-if windows; the loader keeps it on the scenario when it
  needs it, the runner replays that one; imports ``model``, ``planner_bounds``.
* :mod:`~simulator.scenario.reach`: will the run's LUT lookups stay on the
  grids (``lut_out_of_range: raise``), from the scenario and its request
  table; imports ``model``.
* :mod:`~simulator.scenario.reference`: the generated key reference.
"""

from __future__ import annotations

from simulator.scenario.load import load_scenario
from simulator.scenario.model import (
    DeviceClass,
    LaneSpec,
    Link,
    ModelSpec,
    NetworkSpec,
    PolicyChoice,
    Scenario,
    SpeculationSpec,
)
from simulator.scenario.schema import scenario_schema

__all__ = [
    "DeviceClass",
    "LaneSpec",
    "Link",
    "ModelSpec",
    "NetworkSpec",
    "PolicyChoice",
    "Scenario",
    "SpeculationSpec",
    "load_scenario",
    "scenario_schema",
]
