import numpy as np
import pytest

from simulator.rng import STREAM_NAMES, RandomStreams


def test_same_seed_same_numbers():
    a = RandomStreams(7).get("arrivals").random(5)
    b = RandomStreams(7).get("arrivals").random(5)
    assert np.array_equal(a, b)


def test_streams_are_independent_and_seed_dependent():
    streams = RandomStreams(7)
    draws = {name: streams.get(name).random(3).tolist() for name in STREAM_NAMES}
    assert len({tuple(v) for v in draws.values()}) == len(STREAM_NAMES)
    assert RandomStreams(8).get("arrivals").random(3).tolist() != draws["arrivals"]


def test_children_differ_from_each_other_and_parent():
    streams = RandomStreams(3)
    parent = streams.get("devices").random(3).tolist()
    first = streams.child("devices", 0).random(3).tolist()
    second = streams.child("devices", 1).random(3).tolist()
    assert len({tuple(parent), tuple(first), tuple(second)}) == 3
    assert streams.child("devices", 1).random(3).tolist() == second


def test_unknown_stream_and_bad_seed_rejected():
    with pytest.raises(KeyError, match="known: arrivals"):
        RandomStreams(1).get("weather")
    with pytest.raises(ValueError):
        RandomStreams(-1)


def test_buffered_draws_are_reproducible_and_distributed():
    from simulator.rng import BufferedDraws, RandomStreams

    one = BufferedDraws(RandomStreams(3).get("jitter"), block=7)
    two = BufferedDraws(RandomStreams(3).get("jitter"), block=7)
    first = [(one.random(), one.standard_normal()) for _ in range(20)]
    assert first == [(two.random(), two.standard_normal()) for _ in range(20)]
    many = BufferedDraws(RandomStreams(4).get("jitter"))
    uniforms = [many.random() for _ in range(20000)]
    normals = [many.standard_normal() for _ in range(20000)]
    assert min(uniforms) >= 0.0 and max(uniforms) < 1.0
    assert abs(sum(uniforms) / 20000 - 0.5) < 0.01
    assert abs(sum(normals) / 20000) < 0.03
