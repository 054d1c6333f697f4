"""Deadlock avoidance: clients issuing tensors in different orders.

The naive proxy (one FIFO shared by every client, served head first) stalls; COARSE's (one
queue per client, all synchronised together) completes. A stall is checked here to be a real
deadlock from its reported state: the FIFO is full, so nobody can send, and its head tensor
lacks a copy that is still unsent.
"""

import pytest
from hypothesis import given, settings, strategies as st

from golden_model.coarse import simulate_queues
from golden_model.errors import ConfigError

T = 8
FORWARD, REVERSE = list(range(T)), list(reversed(range(T)))


def test_naive_stalls_and_coarse_completes_on_different_orders():
    orders = [FORWARD, REVERSE]
    naive = simulate_queues(orders, "naive")
    assert not naive.completed and naive.reduced == ()
    # the state reported is stuck: the FIFO holds T entries (full), so no client may send;
    # the head's tensor has one copy queued and the other still unsent by client 1
    assert len(naive.queued) == T
    head_client, head = naive.queued[0]
    assert sum(t == head for _, t in naive.queued) == 1
    other = 1 - head_client
    assert head in naive.pending[other] and naive.pending[other][0] != head
    coarse = simulate_queues(orders, "coarse")
    assert coarse.completed and sorted(coarse.reduced) == FORWARD
    assert coarse.queued == () and coarse.pending == ()


def test_naive_completes_when_every_client_uses_the_same_order():
    run = simulate_queues([FORWARD] * 4, "naive")
    assert run.completed and run.reduced == tuple(FORWARD)
    assert run.steps == T               # one tensor sent by everyone and reduced per step


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_coarse_completes_for_any_orders(data):
    clients = data.draw(st.integers(1, 6))
    tensors = data.draw(st.integers(1, 12))
    orders = [data.draw(st.permutations(range(tensors))) for _ in range(clients)]
    run = simulate_queues(orders, "coarse")
    assert run.completed
    assert sorted(run.reduced) == list(range(tensors))       # each reduced exactly once


def test_queue_per_client_needs_a_slot_per_tensor():
    """The guarantee rests on the parameter storage's slot per tensor: with one slot per client
    queue, two clients in opposite orders stall too."""
    run = simulate_queues([FORWARD, REVERSE], "coarse", depth=1)
    assert not run.completed
    assert run.queued == ((0, 0), (1, T - 1))


@pytest.mark.parametrize("orders,scheme,depth,needle", [
    ([[0, 1], [1, 0]], "fifo", None, "scheme"),
    ([], "coarse", None, "at least one"),
    ([[0, 1], [0, 2]], "coarse", None, "exactly once"),
    ([[0, 0]], "coarse", None, "exactly once"),
    ([[0, 1]], "naive", 0, "depth"),
])
def test_bad_input(orders, scheme, depth, needle):
    with pytest.raises(ConfigError, match=needle):
        simulate_queues(orders, scheme, depth)
