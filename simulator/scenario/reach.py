"""Will the run's LUT lookups stay on the grids? Checked before it starts.

With ``simulation.lut_out_of_range: raise`` a lookup outside a LUT's grid
stops a run with an error, possibly long after it started. This module finds
such lookups from the loaded scenario and its request table, the same
(phase, context, batch, k) points the engine will query:

* target prefill (``prefill`` of the verifier or fused model): the batch's
  mean context, at least the shortest prompt routed there; batches of 1 to
  ``scheduler.prefill.batching.max_batch`` sequences; k = 1;
* target decode-lane steps (``draft_decode`` in mode none, ``verify`` and
  ``fused_decode`` when speculating): context from the shortest prompt + 1
  (the first token is out), batches of 1 to
  ``scheduler.verify.batching.max_batch``; k = 1 for plain decode, else 1 (a
  round near the end of the output drafts fewer tokens) to the largest k the
  controller can choose;
* draft devices (``prefill`` and ``draft_decode`` of the drafter): the prompt
  on its own, then contexts from prompt + 1, batches of 1 to the smaller of
  ``scheduler.draft.batching.max_batch`` and the profile's
  ``max_concurrent_requests``; k = 1. A class listing several drafter
  models is checked for each of them (a request may draft with any model
  whose window covers it).

Batch sizes are also capped by the number of requests that can reach the
class. Requests longer than a model's context window are rejected on arrival
(reason ``context_window``) and never looked up, so they are left out and the
top of the context axis is never a problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.errors import Issue, make_issue
from simulator.lut import LutGrid, LutKey
from simulator.scenario.model import DeviceClass, ModelSpec, Scenario
from simulator.workload import RequestTable, SyntheticSource

FIX = "or set simulation.lut_out_of_range: clamp or extrapolate"
"""The other way out, appended to every ``allowed`` text."""

LIST_OF_KIND = {"drafter": "drafter_models", "verifier": "verifier_models", "fused": "fused_models"}
"""The ``speculation`` list each model kind is declared in."""

PLAIN_DECODE = "draft_decode"
"""The phase of a plain decode step (mode none)."""


@dataclass(frozen=True)
class _Lookups:
    """The lookups one device class makes with one model and phase.

    Attributes:
        device: The class running the phase.
        model: The model it runs.
        phase: The LUT phase.
        served: Which requests of the table can reach these lookups.
        context_offset: Smallest context minus the prompt (0 for a prefill
            batch, 1 for a step after the first token).
        batch_key: Key path of the batch limit.
        batch_limit: Its value.
        batch_max: Largest batch that can form.
        k_key: Key path of the draft length (``None``: k is always 1).
        k_max: Largest k looked up.
    """

    device: DeviceClass
    model: ModelSpec
    phase: str
    served: np.ndarray
    context_offset: int
    batch_key: str
    batch_limit: int
    batch_max: int
    k_key: str | None = None
    k_max: int = 1


class _Reach:
    """Collects the issues of one scenario and request table."""

    def __init__(self, scenario: Scenario, table: RequestTable) -> None:
        self.scenario = scenario
        self.table = table
        self.prompt = np.asarray(table.prompt_tokens)
        self.output = np.asarray(table.output_tokens)
        self.origin = np.asarray(table.origin)
        self.issues: list[Issue] = []
        self.seen: set[tuple[str, str, str]] = set()
        self.prompt_needs: dict[tuple[str, str], int] = {}
        self.prompt_issues: dict[tuple[str, str], Issue] = {}

    # -- what the engine looks up --------------------------------------------
    def window(self, device: DeviceClass, model: ModelSpec, phases: Sequence[str]) -> int:
        """The context window of ``model`` on ``device``: the top of its context axes."""
        return min(self.grid(device, model, phase).context_len[-1] for phase in phases)

    def grid(self, device: DeviceClass, model: ModelSpec, phase: str) -> LutGrid:
        """The grid axes of one LUT key."""
        return self.scenario.luts.grid(self.key(device, model, phase))

    def key(self, device: DeviceClass, model: ModelSpec, phase: str) -> LutKey:
        """The LUT key of ``model`` running ``phase`` on ``device``."""
        return self.scenario.lut_key(model, device, phase)

    def routed_to(self, target: DeviceClass) -> np.ndarray:
        """Which requests can be routed to ``target`` (the engine's candidate replicas)."""
        network = self.scenario.network
        targets = self.scenario.targets()
        mask: np.ndarray = np.asarray(self.origin == "", dtype=bool)
        for client in self.scenario.clients():
            linked = [t.id for t in targets if network.link_between(client.id, t.id)]
            if target.id in linked or not linked:
                mask |= self.origin == client.id
        return mask

    def planned(self) -> dict[str, tuple[float | str, ...]]:
        """The online planner's candidate values by key (none without a planner)."""
        planner = self.scenario.planner
        return planner.candidates if planner.enabled else {}

    def verify_batch(self) -> tuple[str, int]:
        """Key path and value of the largest decode-lane batch (the planner's may be larger)."""
        key, top = (
            "scheduler.verify.batching.max_batch",
            self.scenario.scheduler.verify.limits.max_batch,
        )
        planned = max((int(v) for v in self.planned().get("max_batch", ())), default=0)
        if planned > top:
            key, top = "planner.candidates.max_batch", planned
        return key, top

    def k_top(self, served: np.ndarray) -> tuple[str, int]:
        """Key path and value of the largest k a round of the served requests drafts."""
        spec = self.scenario.speculation
        planned = self.planned()
        if spec.k_control.name == "static" and "k_controller" not in planned:
            key, top = "speculation.k", spec.k
        else:
            key, top = "speculation.adaptive_k.k_max", spec.k_max
        k_planned = max((int(v) for v in planned.get("k", ())), default=0)
        if k_planned > top:
            key, top = "planner.candidates.k", k_planned
        # A round never drafts past the output: at most output - 2 after the first token.
        longest = int(self.output[served].max())
        return key, max(1, min(top, longest - 2))

    def target_lookups(self) -> list[_Lookups]:
        """The prefill and decode-lane lookups of every target class, per work kind."""
        spec = self.scenario.speculation
        sched = self.scenario.scheduler
        mode = spec.mode
        found: list[_Lookups] = []
        kinds = {"none": ("decode",), "distributed": ("verify",), "fused": ("fused",)}
        for target in self.scenario.targets():
            routed = self.routed_to(target)
            for kind in kinds.get(mode, ("verify", "fused")):
                name = target.fused_model if kind == "fused" else target.model
                if name is None:
                    continue
                model = spec.models[name]
                step = {"decode": PLAIN_DECODE, "verify": "verify", "fused": "fused_decode"}[kind]
                window = np.full(len(self.table), self.window(target, model, ("prefill", step)))
                if kind == "verify":
                    for client in self.scenario.clients():
                        # A request drafts with a model of its class whose window covers it.
                        own = max(
                            self.window(client, spec.models[name], ("prefill", PLAIN_DECODE))
                            for name in client.draft_models
                        )
                        mine = self.origin == client.id
                        window[mine] = np.minimum(window[mine], own)
                reserve = 0 if kind == "decode" else spec.k_max
                served = routed & (self.prompt + self.output + reserve <= window)
                count = int(served.sum())
                if not count:
                    continue
                prefill = sched.prefill.limits.max_batch
                found.append(
                    _Lookups(
                        target,
                        model,
                        "prefill",
                        served,
                        0,
                        "scheduler.prefill.batching.max_batch",
                        prefill,
                        min(prefill, count),
                    )
                )
                verify_key, verify = self.verify_batch()
                k_key, k_max = (None, 1) if kind == "decode" else self.k_top(served)
                found.append(
                    _Lookups(
                        target,
                        model,
                        step,
                        served,
                        1,
                        verify_key,
                        verify,
                        min(verify, count),
                        k_key,
                        k_max,
                    )
                )
        return found

    def client_lookups(self) -> list[_Lookups]:
        """The prefill and draft lookups of every client class that drafts."""
        spec = self.scenario.speculation
        if spec.mode not in ("distributed", "hybrid"):
            return []
        limit = self.scenario.scheduler.draft.limits.max_batch
        found: list[_Lookups] = []
        for client, name in ((c, n) for c in self.scenario.clients() for n in c.draft_models):
            # Every model a request of the class may draft with (any that covers it).
            model = spec.models[name]
            window = self.window(client, model, ("prefill", PLAIN_DECODE))
            served = (self.origin == client.id) & (self.prompt + self.output + spec.k_max <= window)
            count = int(served.sum())
            if not count:
                continue
            slots = client.profile.compute.max_concurrent_requests or 1
            key = "scheduler.draft.batching.max_batch"
            found.append(_Lookups(client, model, "prefill", served, 0, key, 1, 1))
            found.append(
                _Lookups(
                    client, model, PLAIN_DECODE, served, 1, key, limit, min(limit, slots, count)
                )
            )
        return found

    # -- comparing with the grids ----------------------------------------------
    def add(self, key_path: str, value: object, allowed: str, problem: str) -> None:
        """Record an issue in the scenario file, once per key path, value and allowed text."""
        issue = make_issue(self.scenario.source_file, key_path, value, allowed, problem)
        marker = (issue.key_path, issue.value, issue.allowed)
        if marker not in self.seen:
            self.seen.add(marker)
            self.issues.append(issue)

    def model_key(self, model: ModelSpec) -> str:
        """The key path of the model's ``lut`` entry."""
        same_kind = [
            m.name for m in self.scenario.speculation.models.values() if m.kind == model.kind
        ]
        return f"speculation.{LIST_OF_KIND[model.kind]}[{same_kind.index(model.name)}].lut"

    def prompt_key(self) -> str:
        """The workload key that sets the prompt lengths."""
        workload = self.scenario.workload
        if isinstance(workload.source, SyntheticSource):
            return "workload.synthetic.prompt_tokens"
        if workload.prompt_length_override is not None:
            return "workload.prompt_length_override"
        return "workload.source"

    def where(self, index: int) -> str:
        """Where request ``index`` of the table comes from, for messages."""
        workload = self.scenario.workload
        source = workload.source
        if isinstance(source, SyntheticSource) or workload.prompt_length_override is not None:
            return f"request {index} of the generated workload"
        rows = source.sliced(workload.max_requests)
        return f"request {index}, row {rows.row_of(index)} of {rows.path.name}"

    def starts_at_one(
        self, look: _Lookups, axis_name: str, axis: Sequence[int], what: str, why: str
    ) -> None:
        """Report an axis of the grid that does not start at 1, where every lookup can start."""
        if axis[0] > 1:
            self.add(
                self.model_key(look.model),
                f"smallest {axis_name} {axis[0]} for phase {look.phase}",
                f"a grid starting at {axis_name} 1 in {what} ({why}); {FIX}",
                f"LUT grid misses {axis_name} 1",
            )

    def check(self, look: _Lookups) -> None:
        """Compare one class's lookups of one phase with the grid of its LUT key."""
        grid = self.grid(look.device, look.model, look.phase)
        lut = look.model.lut_path.name
        what = (
            f"LUT {lut} for {self.key(look.device, look.model, look.phase).describe()} "
            f"(used by {look.device.id})"
        )
        prompts = np.where(look.served, self.prompt, np.iinfo(np.int64).max)
        shortest = int(prompts.argmin())
        smallest = int(self.prompt[shortest]) + look.context_offset
        need = grid.context_len[0] - look.context_offset
        # One message per model and device: its prefill or its first step, whichever needs more.
        strictest = (look.device.id, look.model.name)
        if smallest < grid.context_len[0] and need > self.prompt_needs.get(strictest, 0):
            self.prompt_needs[strictest] = need
            step = (
                "its prefill"
                if look.context_offset == 0
                else f"its first {look.phase} step at prompt + {look.context_offset} tokens"
            )
            self.prompt_issues[strictest] = make_issue(
                self.scenario.source_file,
                self.prompt_key(),
                f"shortest prompt {int(self.prompt[shortest])} tokens ({self.where(shortest)})",
                f">= {need} tokens, as {step} is looked up at context >= {grid.context_len[0]}, "
                f"the smallest context_len of {what}; {FIX}",
                "prompt shorter than the LUT's context grid",
            )
        self.starts_at_one(look, "microbatch", grid.microbatch, what, "a batch of one can form")
        if look.batch_max > grid.microbatch[-1]:
            self.add(
                look.batch_key,
                look.batch_limit,
                f"<= {grid.microbatch[-1]}, the largest microbatch of {what} (batches of up to "
                f"{look.batch_max} sequences can form); {FIX}",
                "batch limit beyond the LUT's microbatch grid",
            )
        self.starts_at_one(
            look,
            "fanout_k",
            grid.fanout_k,
            what,
            "a round near the end of an output drafts one token; prefill and plain decode "
            "look up k = 1",
        )
        if look.k_key is not None and look.k_max > grid.fanout_k[-1]:
            self.add(
                look.k_key,
                look.k_max,
                f"<= {grid.fanout_k[-1]}, the largest fanout_k of {what}; {FIX}",
                "draft length beyond the LUT's fanout_k grid",
            )


def lut_reach_issues(scenario: Scenario, table: RequestTable) -> list[Issue]:
    """Find the lookups a run of ``scenario`` would make outside its LUT grids.

    Only meaningful with ``simulation.lut_out_of_range: raise`` (the other
    rules never fail); callers check that.

    Args:
        scenario: A built scenario.
        table: Its requests (see :mod:`simulator.scenario.requests`).

    Returns:
        One issue per offending key path, value and grid, in the scenario file.
    """
    reach = _Reach(scenario, table)
    if not len(reach.table):
        return []
    for look in reach.target_lookups() + reach.client_lookups():
        reach.check(look)
    return list(reach.prompt_issues.values()) + reach.issues
