"""Network transfers between client devices and target pools.

A scenario link describes the connection of *each* device of a client class
to a target pool. Every device has its own instance of that link, with one
transmit queue per direction: a transfer's bytes go out after those already
queued in the same direction (so concurrent transfers of one device share
its bandwidth), then take half the round-trip time to arrive. Jitter
perturbs each transfer's RTT (normal, floored at zero) and bandwidth
(normal, in percent, floored at 1% of nominal); a transfer lost with
probability ``loss_pct`` is sent again after one RTT, as often as needed.
Every byte is counted per link.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.rng import BufferedDraws
from simulator.scenario.model import JitterSpec, Link

BITS_PER_BYTE = 8.0
MIN_BANDWIDTH_FRACTION = 0.01
UPLINK = 0
DOWNLINK = 1


@dataclass
class LinkCounters:
    """Bytes and transfers carried by one scenario link (all its device instances)."""

    bytes_up: float = 0.0
    bytes_down: float = 0.0
    transfers: int = 0
    retransmissions: int = 0


class Network:
    """Computes transfer delays and keeps per-link byte counts."""

    def __init__(self, jitter: JitterSpec, rng: np.random.Generator) -> None:
        self.jitter = jitter
        self.draws = BufferedDraws(rng)
        self._rtt_sigma_s = jitter.rtt_sigma_ms / 1000.0 if jitter.enabled else 0.0
        self._bw_sigma = jitter.bw_sigma_pct / 100.0 if jitter.enabled else 0.0
        self._busy_until: dict[tuple[str, str, int, int], float] = {}
        self.counters: dict[tuple[str, str], LinkCounters] = {}

    def transfer(
        self,
        link: Link,
        instance: int,
        direction: int,
        nbytes: float,
        now_s: float,
    ) -> float:
        """Schedule a transfer; return the time its last byte arrives.

        Args:
            link: The scenario link.
            instance: Which device of the client class the transfer belongs to.
            direction: :data:`UPLINK` (client to target) or :data:`DOWNLINK`.
            nbytes: Payload size in bytes.
            now_s: Time the transfer is handed to the link.
        """
        rtt_s = link.rtt_ms / 1000.0
        bandwidth_bps = link.bw_mbps * 1e6
        if self._rtt_sigma_s > 0:
            rtt_s = max(0.0, rtt_s + self._rtt_sigma_s * self.draws.standard_normal())
        if self._bw_sigma > 0:
            factor = 1.0 + self._bw_sigma * self.draws.standard_normal()
            bandwidth_bps *= max(MIN_BANDWIDTH_FRACTION, factor)
        serialise_s = nbytes * BITS_PER_BYTE / bandwidth_bps
        queue_key = (link.src, link.dst, instance, direction)
        start_s = max(now_s, self._busy_until.get(queue_key, 0.0))
        done_s = start_s + serialise_s
        counters = self._counters_of(link)
        if link.loss_pct > 0:
            while self.draws.random() < link.loss_pct / 100.0:
                counters.retransmissions += 1
                done_s += rtt_s + serialise_s
        self._busy_until[queue_key] = done_s
        counters.transfers += 1
        if direction == UPLINK:
            counters.bytes_up += nbytes
        else:
            counters.bytes_down += nbytes
        return done_s + rtt_s / 2.0

    def _counters_of(self, link: Link) -> LinkCounters:
        key = (link.src, link.dst)
        counters = self.counters.get(key)
        if counters is None:
            counters = self.counters[key] = LinkCounters()
        return counters

    def count(self, link: Link, direction: int, nbytes: float) -> None:
        """Count bytes that cross a link without modelling their delay (streamed tokens)."""
        counters = self._counters_of(link)
        if direction == UPLINK:
            counters.bytes_up += nbytes
        else:
            counters.bytes_down += nbytes

    def one_way_s(self, link: Link, nbytes: float) -> float:
        """Nominal one-way delay of a small message (no queueing, no jitter)."""
        return link.rtt_ms / 2000.0 + nbytes * BITS_PER_BYTE / (link.bw_mbps * 1e6)

    def total_bytes(self) -> float:
        """All bytes carried by all links."""
        return sum(c.bytes_up + c.bytes_down for c in self.counters.values())
