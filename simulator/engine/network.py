"""Network transfers between client devices and target pools.

A scenario link describes the connection of *each* device of a client class
to a target pool. Every device has its own instance of that link, made of two
:class:`Channel` objects, one per direction, each a transmit queue: a
transfer's bytes go out after those already queued in the same direction (so
concurrent transfers of one device share its bandwidth), then take half the
round-trip time to arrive. Jitter perturbs each transfer's RTT (normal,
floored at zero) and bandwidth (normal, in percent, floored at 1% of
nominal); transfers of one channel arrive in the order they were sent (one
whose jittered delay would have it overtake the one before arrives with
it). A transfer lost with probability ``loss_pct`` is sent again after one
RTT, as often as needed (``loss_pct`` is at most 90, so 10 sends on
average). Every byte is counted per scenario link.

A request resolves its two channels once, when it is admitted, and sends
through them directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.rng import BufferedDraws
from simulator.scenario.model import JitterSpec, Link

BITS_PER_BYTE = 8.0
MIN_BANDWIDTH_FRACTION = 0.01


@dataclass
class LinkCounters:
    """Bytes and transfers carried by one scenario link (all its device instances)."""

    bytes_up: float = 0.0
    bytes_down: float = 0.0
    transfers: int = 0
    retransmissions: int = 0


class Channel:
    """One direction of one device's instance of a scenario link.

    Attributes:
        link: The scenario link.
        uplink: ``True`` for client to target, ``False`` for target to client.
        counters: The link's counters (shared by all its channels).
    """

    __slots__ = (
        "_arrived_s",
        "_bandwidth_bps",
        "_busy_until_s",
        "_bw_sigma",
        "_draws",
        "_loss",
        "_rtt_s",
        "_rtt_sigma_s",
        "_steady",
        "counters",
        "link",
        "uplink",
    )

    def __init__(
        self,
        link: Link,
        uplink: bool,
        counters: LinkCounters,
        jitter: JitterSpec,
        draws: BufferedDraws,
    ) -> None:
        self.link = link
        self.uplink = uplink
        self.counters = counters
        self._rtt_s = link.rtt_ms / 1000.0
        self._bandwidth_bps = link.bw_mbps * 1e6
        self._loss = link.loss_pct / 100.0
        self._rtt_sigma_s = jitter.rtt_sigma_ms / 1000.0 if jitter.enabled else 0.0
        self._bw_sigma = jitter.bw_sigma_pct / 100.0 if jitter.enabled else 0.0
        self._draws = draws
        self._busy_until_s = 0.0
        self._arrived_s = 0.0
        """When the last transfer sent so far arrives (a later one never arrives before)."""
        self._steady = self._rtt_sigma_s == 0 and self._bw_sigma == 0 and self._loss == 0
        """No jitter and no loss: every transfer takes its nominal time."""

    def send(self, nbytes: float, sent_s: float) -> float:
        """Queue ``nbytes`` handed over at ``sent_s``; return when the last byte arrives."""
        busy_s = self._busy_until_s
        start_s = sent_s if sent_s > busy_s else busy_s
        if self._steady:
            rtt_s = self._rtt_s
            done_s = start_s + nbytes * BITS_PER_BYTE / self._bandwidth_bps
        else:
            rtt_s, done_s = self._perturbed(nbytes, start_s)
        self._busy_until_s = done_s
        counters = self.counters
        counters.transfers += 1
        if self.uplink:  # self.count(nbytes), inlined: this runs twice a round
            counters.bytes_up += nbytes
        else:
            counters.bytes_down += nbytes
        arrived_s = done_s + rtt_s / 2.0
        # In order: with a jittered RTT a transfer could otherwise overtake the one
        # sent before it (a request's last token arriving before its first).
        if arrived_s < self._arrived_s:
            arrived_s = self._arrived_s
        self._arrived_s = arrived_s
        return arrived_s

    def _perturbed(self, nbytes: float, start_s: float) -> tuple[float, float]:
        """Return the RTT and the end of serialisation of a transfer with jitter and loss."""
        draws = self._draws
        rtt_s = self._rtt_s
        bandwidth_bps = self._bandwidth_bps
        if self._rtt_sigma_s > 0:
            rtt_s = max(0.0, rtt_s + self._rtt_sigma_s * draws.standard_normal())
        if self._bw_sigma > 0:
            factor = 1.0 + self._bw_sigma * draws.standard_normal()
            bandwidth_bps *= max(MIN_BANDWIDTH_FRACTION, factor)
        serialise_s = nbytes * BITS_PER_BYTE / bandwidth_bps
        done_s = start_s + serialise_s
        while self._loss > 0 and draws.random() < self._loss:
            self.counters.retransmissions += 1
            done_s += rtt_s + serialise_s
        return rtt_s, done_s

    def count(self, nbytes: float) -> None:
        """Count bytes that cross the link without modelling their delay (streamed tokens)."""
        if self.uplink:
            self.counters.bytes_up += nbytes
        else:
            self.counters.bytes_down += nbytes


class Network:
    """Makes the channels of device link instances and keeps per-link byte counts."""

    def __init__(self, jitter: JitterSpec, rng: np.random.Generator) -> None:
        self.jitter = jitter
        self.draws = BufferedDraws(rng)
        self.counters: dict[tuple[str, str], LinkCounters] = {}
        self._channels: dict[tuple[str, str, int], tuple[Channel, Channel]] = {}

    def channels(self, link: Link, instance: int) -> tuple[Channel, Channel]:
        """Return the (uplink, downlink) channels of device ``instance`` on ``link``."""
        key = (link.src, link.dst, instance)
        pair = self._channels.get(key)
        if pair is None:
            counters = self.counters.get((link.src, link.dst))
            if counters is None:
                counters = self.counters[(link.src, link.dst)] = LinkCounters()
            pair = (
                Channel(link, True, counters, self.jitter, self.draws),
                Channel(link, False, counters, self.jitter, self.draws),
            )
            self._channels[key] = pair
        return pair

    def total_bytes(self) -> float:
        """All bytes carried by all links."""
        return sum(c.bytes_up + c.bytes_down for c in self.counters.values())
