"""Link channels: queueing, serialisation, propagation, jitter and loss."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.engine.network import Network
from simulator.scenario.model import JitterSpec, Link

NO_JITTER = JitterSpec(enabled=False, rtt_sigma_ms=0.0, bw_sigma_pct=0.0)


def _channels(link: Link, jitter: JitterSpec = NO_JITTER, seed: int = 1):
    network = Network(jitter, np.random.default_rng(seed))
    return network, *network.channels(link, instance=0)


def test_transfers_queue_per_direction_and_arrive_half_an_rtt_after_their_last_byte():
    link = Link("phones", "pool", rtt_ms=40.0, bw_mbps=8.0, loss_pct=0.0)
    network, up, down = _channels(link)
    # 1,000 bytes at 8 Mbit/s take 1 ms to serialise; the one-way delay is 20 ms.
    assert up.send(1000, 0.0) == pytest.approx(0.021)
    # Sent at 0.5 ms, the second transfer waits for the first to leave the queue.
    assert up.send(1000, 0.0005) == pytest.approx(0.022)
    # The other direction has its own queue; a later, idle start does not wait.
    assert down.send(1000, 0.0) == pytest.approx(0.021)
    assert up.send(1000, 1.0) == pytest.approx(1.021)
    counters = network.counters[("phones", "pool")]
    assert (counters.bytes_up, counters.bytes_down, counters.transfers) == (3000, 1000, 4)
    assert network.total_bytes() == 4000


def test_each_device_has_its_own_link_instance():
    link = Link("phones", "pool", rtt_ms=0.0, bw_mbps=8.0, loss_pct=0.0)
    network = Network(NO_JITTER, np.random.default_rng(1))
    first_up, _ = network.channels(link, instance=0)
    second_up, _ = network.channels(link, instance=1)
    assert network.channels(link, instance=0)[0] is first_up
    assert first_up.send(1000, 0.0) == pytest.approx(0.001)
    assert second_up.send(1000, 0.0) == pytest.approx(0.001)  # no shared queue


def test_loss_retransmits_after_an_rtt_with_the_geometric_mean_count():
    """With loss p each transfer is retried a geometric number of times: mean p / (1 - p)."""
    link = Link("phones", "pool", rtt_ms=10.0, bw_mbps=8.0, loss_pct=50.0)
    network, up, _ = _channels(link, seed=3)
    n = 20_000
    delays = [up.send(1000, 10.0 * i) - 10.0 * i for i in range(n)]
    counters = network.counters[("phones", "pool")]
    assert counters.retransmissions / n == pytest.approx(1.0, rel=0.05)
    # Each retransmission adds one RTT plus the serialisation time again.
    expected = 0.001 + 0.005 + counters.retransmissions / n * (0.010 + 0.001)
    assert np.mean(delays) == pytest.approx(expected, rel=1e-9)
    assert min(delays) == pytest.approx(0.006)


def test_jitter_varies_delays_around_the_nominal_rtt_and_never_goes_negative():
    link = Link("phones", "pool", rtt_ms=2.0, bw_mbps=1000.0, loss_pct=0.0)
    jitter = JitterSpec(enabled=True, rtt_sigma_ms=2.0, bw_sigma_pct=10.0)
    _, up, _ = _channels(link, jitter, seed=5)
    delays = np.array([up.send(4, 1.0 * i) - 1.0 * i for i in range(20_000)])
    assert delays.min() >= 0.0
    assert delays.std() > 0.0005
    # RTT floored at zero: the mean one-way delay is a little above half the nominal RTT.
    assert 0.001 <= delays.mean() <= 0.0015


def test_jittered_transfers_of_a_channel_arrive_in_the_order_they_were_sent():
    """A later transfer never overtakes an earlier one of the same channel.

    Before, each transfer arrived its own jittered half RTT after its last byte, so one
    sent 1 ms after another with a 50 ms RTT sigma often arrived first: in a hybrid run
    with that jitter, fused requests' last tokens reached the client before their first
    (TTFT above E2E, negative TPOT).
    """
    link = Link("phones", "pool", rtt_ms=2.0, bw_mbps=1000.0, loss_pct=0.0)
    jitter = JitterSpec(enabled=True, rtt_sigma_ms=50.0, bw_sigma_pct=0.0)
    _, _, down = _channels(link, jitter, seed=3)
    arrivals = np.array([down.send(4, 0.001 * i) for i in range(2_000)])
    assert (np.diff(arrivals) >= 0).all()
    assert (arrivals >= 0.001 * np.arange(2_000)).all()
