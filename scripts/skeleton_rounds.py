"""A bare-SimPy skeleton of distributed verify rounds: the reference for the engine's speed.

``scripts/bench.py`` times the engine on ``distributed_rounds``
(``scenarios/bench/distributed_rounds.yaml``) in verify rounds per
wall-second. This script times the least a SimPy program must do to move the
same rounds through the same protocol, written the plain SimPy way (one
process per request and per target replica, every delay a timeout), so the
engine's figure can be read as a fraction of it, measured on the same
machine in the same minutes.

Shape (:class:`Shape`, :data:`BENCH_SHAPE`): the bench run's requests,
arriving as a Poisson process at its rate; its draft devices, each serving one
request at a time (a ``simpy.Resource``), requests assigned to them round
robin; its target replicas, requests assigned round robin; every request
runs the bench run's mean number of rounds. A round is a draft burst (a
timeout of the mean draft time per round), the bundle's upload (a timeout of
half the link's RTT), a wait in its replica's queue, and the result's
download (a timeout of half the RTT). A replica verifies everything queued
as one batch iteration (one timeout of the mean iteration time) and then
wakes each member. Prompts, prefills, KV, acceptance draws, pricing and
every metric are left out: the skeleton is the event traffic alone.

Every figure of :data:`BENCH_SHAPE` comes from one run of the bench
scenario: ``python scripts/skeleton_rounds.py --calibrate`` runs it and
prints them (rounds and requests from its summary, the mean draft time per
round from the draft devices' busy time, the mean iteration time from the
replicas' busy time and iteration count, the RTT from the scenario's link, the
arrival rate realised by its requests).

Usage::

    python scripts/skeleton_rounds.py              # rounds per wall-second, best of 5
    python scripts/skeleton_rounds.py --calibrate  # derive BENCH_SHAPE from the bench run
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import simpy

ROOT = Path(__file__).resolve().parent.parent
BENCH_SCENARIO = ROOT / "scenarios" / "bench" / "distributed_rounds.yaml"
RUNS = 5


@dataclass(frozen=True)
class Shape:
    """The shape of a distributed run the skeleton reproduces.

    Attributes:
        requests: Requests of the run.
        rounds: Verify rounds of the run (each request runs ``rounds / requests``, rounded).
        devices: Draft devices (one request at a time each).
        replicas: Target replicas.
        arrival_rate_per_s: Poisson arrival rate of the requests.
        draft_s: Draft time of one round.
        link_rtt_s: Round-trip time of the device-target link (each way takes half).
        iteration_s: Time of one verify iteration.
    """

    requests: int
    rounds: int
    devices: int
    replicas: int
    arrival_rate_per_s: float
    draft_s: float
    link_rtt_s: float
    iteration_s: float


BENCH_SHAPE = Shape(
    requests=2000,
    rounds=237950,
    devices=1000,
    replicas=2,
    arrival_rate_per_s=3.9696,
    draft_s=0.0023926,
    link_rtt_s=0.008,
    iteration_s=0.0120984,
)
"""The bench run's shape (``--calibrate`` derives it from ``distributed_rounds.yaml``)."""


class _Replica:
    """A target replica: a queue of waiting rounds and the process verifying them in batches."""

    def __init__(self, env: simpy.Environment, iteration_s: float) -> None:
        self.env = env
        self.iteration_s = iteration_s
        self.queue: list[simpy.Event] = []
        self.wake: simpy.Event | None = None
        self.iterations = 0
        env.process(self._serve())

    def submit(self, done: simpy.Event) -> None:
        """Queue a round; wake the replica if it is idle."""
        self.queue.append(done)
        if self.wake is not None:
            wake, self.wake = self.wake, None
            wake.succeed()

    def _serve(self) -> Generator[simpy.Event, None, None]:
        env = self.env
        while True:
            if not self.queue:
                self.wake = env.event()
                yield self.wake
            batch, self.queue = self.queue, []
            yield env.timeout(self.iteration_s)
            self.iterations += 1
            for done in batch:
                done.succeed()


def _request(
    env: simpy.Environment,
    device: simpy.Resource,
    replica: _Replica,
    rounds: int,
    shape: Shape,
) -> Generator[simpy.Event, None, None]:
    """One request: wait for its device, then run its rounds."""
    half_rtt_s = shape.link_rtt_s / 2.0
    with device.request() as slot:
        yield slot
        for _ in range(rounds):
            yield env.timeout(shape.draft_s)  # draft the bundle
            yield env.timeout(half_rtt_s)  # upload it
            done = env.event()
            replica.submit(done)
            yield done  # verified
            yield env.timeout(half_rtt_s)  # download the result


def _arrivals(
    env: simpy.Environment, shape: Shape, rounds_per_request: int, seed: int
) -> Generator[simpy.Event, None, None]:
    draw = random.Random(seed)
    devices = [simpy.Resource(env, capacity=1) for _ in range(shape.devices)]
    replicas = [_Replica(env, shape.iteration_s) for _ in range(shape.replicas)]
    for index in range(shape.requests):
        yield env.timeout(draw.expovariate(shape.arrival_rate_per_s))
        env.process(
            _request(
                env,
                devices[index % shape.devices],
                replicas[index % shape.replicas],
                rounds_per_request,
                shape,
            )
        )


def run_once(shape: Shape, rounds: int, seed: int = 1) -> tuple[int, float]:
    """Run the skeleton once; return (rounds run, wall seconds)."""
    per_request = max(1, round(rounds / shape.requests))
    env = simpy.Environment()
    started = time.perf_counter()
    env.process(_arrivals(env, shape, per_request, seed))
    env.run()
    return per_request * shape.requests, time.perf_counter() - started


def skeleton_rounds_per_s(rounds: int = BENCH_SHAPE.rounds, runs: int = RUNS) -> float:
    """Verify rounds per wall-second of the skeleton: the best of ``runs`` runs.

    Args:
        rounds: Rounds in all (the bench run's count; each of its requests
            runs ``rounds / requests`` of them).
        runs: How many times it runs (the best, fastest, counts).
    """
    best = 0.0
    for _ in range(runs):
        done, wall_s = run_once(BENCH_SHAPE, rounds)
        best = max(best, done / wall_s)
    return best


def calibrate() -> Shape:
    """Run the bench scenario and derive its shape (see the module docstring)."""
    from simulator import load_scenario
    from simulator.engine.core import Engine
    from simulator.engine.runtime import build_runtime
    from simulator.rng import RandomStreams
    from simulator.scenario.requests import run_requests

    scenario = load_scenario(BENCH_SCENARIO)
    table = run_requests(scenario)
    engine = Engine(build_runtime(scenario), table, RandomStreams(scenario.seed))
    output = engine.run()
    records = output.records
    rounds = sum(record.verify_rounds for record in records)
    replicas = engine.replicas
    devices = sum(h.count for h in scenario.devices if h.type == "draft")
    iterations = sum(replica.iterations for replica in replicas)
    link = scenario.network.links[0]
    return Shape(
        requests=len(records),
        rounds=rounds,
        devices=devices,
        replicas=len(replicas),
        arrival_rate_per_s=round(len(records) / max(r.arrival_s for r in records), 4),
        draft_s=round(output.device_busy_s / rounds, 7),
        link_rtt_s=link.rtt_ms / 1000.0,
        iteration_s=round(sum(replica.busy_s for replica in replicas) / iterations, 7),
    )


def main(argv: list[str] | None = None) -> int:
    """Print the skeleton's verify rounds per wall-second (or, with --calibrate, its shape)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calibrate", action="store_true", help="derive the shape from a run")
    parser.add_argument("--runs", type=int, default=RUNS, help="runs (the best counts)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: allowed an integer >= 1")
    if args.calibrate:
        print(calibrate())
        return 0
    rate = skeleton_rounds_per_s(BENCH_SHAPE.rounds, args.runs)
    print(
        f"skeleton: {rate:,.0f} verify rounds per wall-second "
        f"(bare SimPy, {BENCH_SHAPE.rounds:,} rounds, best of {args.runs})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
