"""The event engine: request flow, target replicas, draft devices and network on one SimPy clock.

Module map (each room, what it owns, what it may touch):

- :mod:`~simulator.engine.core` — the kernel, :class:`~simulator.engine.core.Engine`:
  owns the clock, the request states, arrivals and the run loop (start,
  advance, run, output). Wires the collaborators below and is the planner's
  face (its setters delegate). Builds no policy and reads none.
- :mod:`~simulator.engine.binding` — :class:`~simulator.engine.binding.PolicyBinder`:
  builds every policy from its choice with the run's random streams and
  derives what each reads (windowed signals, predictions), at the start and
  for the planner's setters alike. Owns no run state.
- :mod:`~simulator.engine.speculation` — :class:`~simulator.engine.speculation.Speculation`:
  owns the k controller (swappable), the acceptance draws, the draft-length
  bounds and the iteration-time predictors; chooses each round's k and
  settles each verified round. Servers reach it through their context
  (``ServerContext.speculation``). Touches replicas' windows and k/token
  counters only.
- :mod:`~simulator.engine.dispatcher` — :class:`~simulator.engine.dispatcher.Dispatcher`:
  owns the admission, routing, hybrid and drafter-selection policies, the
  deferred queue and its retry time, and the device draws. Picks each
  request's replica, mode and drafter model and resolves its channels and
  curve. Reads replicas' loads; hands prompts to the flow; never changes
  the fleet.
- :mod:`~simulator.engine.flow` — :class:`~simulator.engine.flow.RequestFlow`:
  implements :class:`~simulator.engine.lifecycle.RequestLifecycle`. Owns the
  outcome counters (outstanding, completed, last outcome) and the migrating
  requests; moves tokens over the network and ends requests. Tells the
  fleet when a replica's request ended; asks the dispatcher for the next
  admission only through its ``on_freed`` hook.
- :mod:`~simulator.engine.fleet` — :class:`~simulator.engine.fleet.Fleet`:
  owns the replicas, the serving list, GPU spans, the draft devices and the
  server context (decode lane, signal window). Changes replica counts and
  roles, drains, retires, says when replicas are ready. Never routes.
- :mod:`~simulator.engine.what_if` — snapshot (:func:`~simulator.engine.what_if.in_flight`),
  placing a window's starting requests through the dispatcher, fleet and
  flow, and :func:`~simulator.engine.what_if.fork`. Owns no state.
- :mod:`~simulator.engine.handover_start` — a disaggregated what-if window's
  start: puts back requests decoding, moving their KV or waiting for a
  decode replica (or migrates them by recompute). Owns no state past the start.
- :mod:`~simulator.engine.records` — the frozen results: ``RequestRecord``,
  ``RequestColumns`` (a run's records as one array per field, filled from the
  request states as the run ends, freeing them as it goes), ``InFlight``,
  ``EngineOutput``, read by metrics, the planner and the runner without
  importing the kernel.
- :mod:`~simulator.engine.lifecycle` — the servers' side: ``ServerContext``
  and the ``RequestLifecycle`` and ``Speculator`` protocols. Servers
  (:mod:`~simulator.engine.target`, :mod:`~simulator.engine.draft_device`)
  know only these, never the rooms above.
- :mod:`~simulator.engine.target` — :class:`~simulator.engine.target.TargetReplica`,
  the replica entity: its queues (prefill lane, decode lane by kind of work,
  verify lane and the pass of split rounds, announced arrivals), counters,
  decision loop, the accounting its mechanisms report to, and the answers
  its arbitration rule asks for (``policies.arbitration.ReplicaLanes``).
  Its mechanisms are objects with their own state that see it only through
  :class:`~simulator.engine.replica_view.ReplicaView` and never import
  ``target``: :mod:`~simulator.engine.replica_kv` (the KV policy of
  ``scheduler.kv.on_full``: owns the ``KvPool``; need, reserve, make room,
  evict, spill), :mod:`~simulator.engine.prefill` (picks prefill batches,
  runs whole-prompt prefills), :mod:`~simulator.engine.decode_runs` (plain
  decode iterations, an unchanged batch fused into one event),
  :mod:`~simulator.engine.verify_rounds` (verify and whole fused
  iterations; commits rounds), :mod:`~simulator.engine.mixed` (chunked
  prefill's mixed iterations) and :mod:`~simulator.engine.split_iterations`
  (lane rules' draft, verify and atomic-round iterations on the GPU that
  :mod:`~simulator.engine.split_rounds` prices). They touch the replica's
  queues, holders, busy flag and accounting; KV only through ``ReplicaKv``;
  each other only downward (kv ← prefill, decode_runs, verify_rounds ←
  mixed, split_iterations).
- Other servers and mechanisms: :mod:`~simulator.engine.draft_device`,
  :mod:`~simulator.engine.costs`, :mod:`~simulator.engine.microbatch`,
  :mod:`~simulator.engine.kv`, :mod:`~simulator.engine.heat`,
  :mod:`~simulator.engine.ragged` (the context a ragged batch is priced
  at), :mod:`~simulator.engine.step_noise` (a replica's step-time noise),
  :mod:`~simulator.engine.gpu_share`, :mod:`~simulator.engine.signals`;
  shared services: :mod:`~simulator.engine.clock`,
  :mod:`~simulator.engine.network`, :mod:`~simulator.engine.tracing`,
  :mod:`~simulator.engine.timeseries`, :mod:`~simulator.engine.usage`,
  :mod:`~simulator.engine.closed_loop`; inputs:
  :mod:`~simulator.engine.runtime`, :mod:`~simulator.engine.step_timing`
  (``simulation.ragged_batches`` and ``step_noise`` with their measured
  constants), :mod:`~simulator.engine.request_state`,
  :mod:`~simulator.engine.policy_build`.

Lane and work-kind names are declared once, in :mod:`policies.lanes`, which
the engine and the arbitration rules both import. What a policy reads of the
engine is a capability its family's Protocol declares with a default
(policies/README.md), read as an attribute, never probed.

Imports run one way: core → what_if → dispatcher → flow → fleet → servers →
lifecycle; speculation and binding sit beside them (no circle, type-only
imports included; ``tests/test_engine_structure.py`` checks it).
"""
