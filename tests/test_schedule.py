"""``AllReduceSchedule.validate``: each invariant it checks, broken on purpose."""

import numpy as np
import pytest

from golden_model.algorithms import ALGORITHMS, build_schedule
from golden_model.schedule import AllReduceSchedule, Op, ScheduleError, Transfer
from golden_model.topology import parse_topology

RING = parse_topology("ring:3")


def ring3(steps, contention_free=False, num_chunks=3):
    """An all-reduce of 3 chunks of one element on ring:3 with the given steps."""
    bounds = np.arange(num_chunks + 1, dtype=np.int64)
    return AllReduceSchedule("test", RING, num_chunks, bounds, steps, contention_free)


def hop(src, dst, chunk, op=Op.REDUCE):
    return Transfer(src, dst, chunk, op, RING.route(src, dst))


def good_steps():
    """Reduce-scatter then all-gather around the ring (ring all-reduce on 3 nodes)."""
    return [[hop(v, (v + 1) % 3, (v + 2) % 3) for v in range(3)],
            [hop(v, (v + 1) % 3, (v + 1) % 3) for v in range(3)],
            [hop(v, (v + 1) % 3, v, Op.COPY) for v in range(3)],
            [hop(v, (v + 1) % 3, (v + 2) % 3, Op.COPY) for v in range(3)]]


def test_ring_all_reduce_is_valid():
    ring3(good_steps(), contention_free=True).validate()


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("spec", ["ring:5", "mesh:3x3", "torus:4x4", "fattree:2x3"])
def test_every_algorithm_builds_valid_schedules(name, spec):
    try:
        sched = build_schedule(name, parse_topology(spec), 1000)
    except Exception as exc:   # an algorithm that cannot run there says so with ConfigError
        assert type(exc).__name__ == "ConfigError"
        return
    sched.validate()


def broken(edit):
    steps = good_steps()
    edit(steps)
    return steps


@pytest.mark.parametrize("edit, message", [
    (lambda s: s[0].append(Transfer(1, 1, 0, Op.REDUCE, ((1, 2),))), "bad endpoints"),
    (lambda s: s[0].append(Transfer(0, 5, 0, Op.REDUCE, ((0, 1),))), "bad endpoints"),
    (lambda s: s[0].__setitem__(0, Transfer(0, 1, 2, Op.REDUCE, ((1, 2),))), "does not lead"),
    (lambda s: s[0].__setitem__(0, Transfer(0, 1, 2, Op.REDUCE, ())), "does not lead"),
    (lambda s: s[0].__setitem__(0, Transfer(0, 2, 2, Op.REDUCE, ((0, 1), (2, 0)))),
     "does not lead"),
    (lambda s: s[0].__setitem__(0, Transfer(0, 1, 7, Op.REDUCE, ((0, 1),))), "out of range"),
    (lambda s: s[1].append(hop(0, 1, 2)), "twice"),
    (lambda s: s.pop(), "lacks contributions"),
    (lambda s: s[3].pop(), r"node 0 chunk 1 lacks contributions of nodes \[1\]"),
])
def test_each_broken_invariant_is_named(edit, message):
    with pytest.raises(ScheduleError, match=message):
        ring3(broken(edit)).validate()


def test_contention_free_is_checked_only_when_promised():
    steps = good_steps()
    steps[2].append(hop(0, 1, 0, Op.COPY))      # link (0, 1) twice, harmless
    ring3(steps).validate()
    with pytest.raises(ScheduleError, match=r"link \(0, 1\) used twice"):
        ring3(steps, contention_free=True).validate()
