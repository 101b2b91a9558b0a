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
