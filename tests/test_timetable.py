"""The timetable (``golden_model.timetable``, link order ``"timetable"``): no two messages on a
link at once, inputs and NI port order kept, and the model's own numbers where nothing meets."""

import dataclasses

import numpy as np
import pytest

from allreduce_rtl.plan import as_built, bank_slots, plan_hardware, release_cycles
from golden_model.errors import ConfigError
from golden_model.timetable import BankSlots
from golden_model.timing import ReductionUnit, TimingParams, hold_cycles, simulate
from golden_model.topology import parse_topology

CASES = [("bigraph:4x4", "multitree", 389), ("bigraph:4x4", "dbtree", 389),
         ("fattree:4x2", "halving-doubling", 197), ("torus:4x4", "dbtree", 389),
         ("mesh:3x3", "multitree-opt", 301)]


def _routed(spec, algorithm, elements, dtype="int32"):
    plan = plan_hardware(parse_topology(spec, link_latency=4), [algorithm], [elements],
                         dtype=dtype, link_latency=4, router=True)
    run = plan.runs[0]
    schedule = as_built(run.schedule, plan.config, plan.hardware_topology)
    return plan, run, schedule


def _intervals(schedule, params, start):
    """Per link, the (from, to) cycles every message holds it, recomputed from the starts with
    the module's rule (head at start plus latency and router delay per earlier hop, tail after
    its flits)."""
    topo = schedule.topology
    out = {}
    for (_, t), t0 in zip(schedule.transfers(), start):
        lo, hi = schedule.chunk_range(t.chunk)
        nbytes = (hi - lo) * params.element_bytes
        at = t0
        for h, link in enumerate(t.route):
            if h:
                at += topo.link_latency(t.route[h - 1]) + params.router_delay
            hold = hold_cycles(nbytes + params.header_flits * params.flit_bytes,
                               topo.link_bandwidth(link), params)
            out.setdefault(link, []).append((at, at + hold))
    return out


@pytest.mark.parametrize("spec, algorithm, elements", CASES)
def test_no_two_messages_share_a_link(spec, algorithm, elements):
    plan, run, schedule = _routed(spec, algorithm, elements)
    params = plan.timing
    assert params.link_order == "timetable" and params.message_gap == 2
    r = simulate(schedule, params)
    assert r.cycles <= run.expected_cycles      # the plan's model: as the NIs run it
    for link, spans in _intervals(schedule, params, r.start.tolist()).items():
        spans.sort()
        for (a0, a1), (b0, _) in zip(spans, spans[1:]):
            assert b0 >= a1 + params.message_gap, (link, (a0, a1), b0)


@pytest.mark.parametrize("spec, algorithm, elements", CASES)
def test_inputs_and_port_order_are_kept(spec, algorithm, elements):
    plan, _, schedule = _routed(spec, algorithm, elements)
    params = plan.timing
    r = simulate(schedule, params)
    start, finish = r.start.tolist(), r.finish.tolist()
    have, last_on_port = {}, {}
    i = 0
    for step in schedule.steps:
        arrived = []
        for t in step:
            assert start[i] >= have.get((t.src, t.chunk), 0) + params.send_delay
            port = t.route[0]
            assert start[i] > last_on_port.get(port, -1)     # the send engine's table order
            last_on_port[port] = start[i]
            arrived.append(((t.dst, t.chunk), finish[i]))
            i += 1
        for key, f in arrived:
            have[key] = max(have.get(key, 0), f)


def test_a_lone_message_takes_the_first_come_first_served_time():
    # nothing to meet: the timetable is the message model (a 3-hop route through switches)
    plan, _, schedule = _routed("bigraph:4x4", "multitree", 389)
    one = dataclasses.replace(schedule, steps=[[schedule.steps[0][0]]])
    for order in ("fcfs", "injection"):
        assert (simulate(one, plan.timing).finish.tolist()
                == simulate(one, dataclasses.replace(plan.timing, link_order=order)).finish.tolist())


def test_ring_is_not_held_and_takes_the_message_model_time():
    # ring on a routed torus sends each step's messages over disjoint links
    plan, run, schedule = _routed("torus:4x4", "ring", 49)
    r = simulate(schedule, plan.timing)
    assert not r.held.any() and release_cycles(r, plan.timing) == [0] * len(r.held)
    assert r.cycles == simulate(schedule, dataclasses.replace(plan.timing,
                                                              link_order="injection")).cycles


def test_release_cycles_hold_only_what_the_timetable_delays():
    plan, run, schedule = _routed("bigraph:4x4", "multitree", 389)
    r = simulate(schedule, plan.timing)
    release = np.array(release_cycles(r, plan.timing))
    assert r.held.any() and (release[~r.held] == 0).all()
    assert (release[r.held] == r.start[r.held] - plan.timing.send_delay + 1).all()
    rows = [row for prog in run.lowered.programs for (d, p), rows in prog.engines.items()
            if d.name == "SEND" for row in rows]
    assert sorted(row.release for row in rows) == sorted(release.tolist())


def test_staged_transfers_finish_after_their_loopback_add():
    plan, run, schedule = _routed("fattree:4x2", "multitree", 197, dtype="float32")
    params, staged = plan.timing, run.lowered.staged
    assert staged
    r = simulate(schedule, params, staged)
    transfers = [t for _, t in schedule.transfers()]
    flits = -(-np.diff(schedule.bounds) // plan.config.elems_per_flit) + params.header_flits
    topo = schedule.topology
    for i in staged:
        t = transfers[i]
        one = dataclasses.replace(schedule, steps=[[t]])
        (_, tail), = _intervals(one, params, [int(r.start[i])])[t.route[-1]]
        arrival = tail + topo.link_latency(t.route[-1]) + params.retire_delay
        # the add: send delay after the arrival, the message's flits through the loopback
        assert r.finish[i] >= (arrival + params.send_delay + flits[t.chunk]
                               + params.loopback_latency + params.retire_delay)


@pytest.mark.parametrize("kw", [{"reduction": ReductionUnit(block_bytes=64, block_cycles=4)}, {"node_lockstep": True}])
def test_timetable_refuses_what_models_other_nis(kw):
    _, _, schedule = _routed("bigraph:4x4", "ring", 49)
    with pytest.raises(ConfigError, match="timetable"):
        simulate(schedule, TimingParams(link_order="timetable", **kw))


def test_timetable_refuses_a_staged_index_out_of_range():
    _, _, schedule = _routed("bigraph:4x4", "ring", 49)
    with pytest.raises(ConfigError, match="staged transfer 9999"):
        simulate(schedule, TimingParams(link_order="timetable"), staged=[9999])


def test_routed_plans_time_the_routes_the_routers_take():
    # MultiTree's reduce edges on a BiGraph list the reverse of their broadcast route, which a
    # destination-routed network does not take; the plan times the routers' routes
    plan, run, _ = _routed("bigraph:4x4", "multitree", 389)
    topo = plan.hardware_topology
    listed = [t.route for _, t in run.schedule.transfers()]
    taken = [t.route for _, t in as_built(run.schedule, plan.config, topo).transfers()]
    assert taken == [topo.route(t.src, t.dst) for _, t in run.schedule.transfers()]
    assert taken != listed
    banks = bank_slots(run.lowered, plan.config, plan.timing)
    assert run.expected_cycles == simulate(as_built(run.schedule, plan.config, topo),
                                           plan.timing, banks=banks).cycles


def test_held_is_every_transfer_started_after_its_inputs():
    # a message behind its port's previous one is held too: the send engine would send it
    # sooner than the timetable's message gap (golden_model.timetable, "held")
    plan, _, schedule = _routed("bigraph:4x8", "multitree", 773)
    r = simulate(schedule, plan.timing)
    have, ready, i = {}, [], 0
    for step in schedule.steps:
        done = []
        for t in step:
            ready.append(have.get((t.src, t.chunk), 0) + plan.timing.send_delay)
            done.append(((t.dst, t.chunk), int(r.finish[i])))
            i += 1
        for key, fin in done:
            have[key] = max(have.get(key, 0), fin)
    ready = np.array(ready)
    assert (r.start >= ready).all()
    assert r.held.any() and (r.held == (r.start > ready)).all()


def test_a_machines_routes_stay_as_listed():
    # an endpoint with several links sends by its route's first link to its last link's
    # terminal, so the routers take the listed route even where topology.route differs
    plan, run, _ = _routed("machine:cloud-v100", "multitree", 200)
    topo = plan.hardware_topology
    listed = [t.route for _, t in run.schedule.transfers()]
    assert any(r != topo.route(t.src, t.dst) for r, (_, t) in zip(listed, run.schedule.transfers()))
    assert [t.route for _, t in as_built(run.schedule, plan.config, topo).transfers()] == listed


def _one_bank(run, plan, write_delay=None):
    """The plan's bank slots with a rotation of one bank (every cycle every client's)."""
    banks = bank_slots(run.lowered, plan.config, plan.timing)
    return banks._replace(banks=1, write_delay=(plan.timing.retire_delay if write_delay is None
                                                else write_delay))


def test_one_bank_runs_the_timetable_where_nothing_waits():
    # ring on a routed torus: one message per port and step, each the next one's input, so
    # with no rotation to wait for the NIs run exactly the timetable
    plan, run, schedule = _routed("torus:4x4", "ring", 49)
    timed = simulate(schedule, plan.timing)
    as_run = simulate(schedule, plan.timing, banks=_one_bank(run, plan))
    assert as_run.finish.tolist() == timed.finish.tolist()
    assert as_run.start.tolist() == timed.start.tolist()


@pytest.mark.parametrize("banks", [2, 4, 8])
def test_a_lone_message_waits_for_its_slots(banks):
    # a start of residue r0 at or after its inputs, a finish of residue r1 at or after its
    # arrival, for every pair of residues
    plan, run, schedule = _routed("bigraph:4x4", "multitree", 389)
    one = dataclasses.replace(schedule, steps=[[schedule.steps[0][0]]])
    timed = simulate(one, plan.timing)
    t0, route = int(timed.start[0]), int(timed.finish[0] - timed.start[0])
    for r0 in range(banks):
        for r1 in range(banks):
            slots = BankSlots(banks, [(r0, r1, 0, 0)], [0], plan.timing.retire_delay)
            start = t0 + (r0 - t0) % banks
            want = start + route + (r1 - start - route) % banks
            assert simulate(one, plan.timing, banks=slots).finish.tolist() == [want]


def test_a_receive_port_takes_one_message_at_a_time():
    # two messages into one receive port: the second's head is popped only once the first's
    # last write retired, write_delay after the first's tail (one bank: no rotation)
    plan, run, schedule = _routed("fattree:4x2", "multitree", 389)
    transfers = [t for _, t in schedule.transfers()]
    first = transfers[0]
    i = next(k for k, t in enumerate(transfers) if k and t.dst == first.dst
             and t.src != first.src)
    two = dataclasses.replace(schedule, steps=[[first, transfers[i]]])
    params = plan.timing
    flits = -(-np.diff(schedule.bounds) * params.element_bytes // params.flit_bytes) + 1
    slow = 100          # a write delay that keeps the port past the second's arrival
    slots = BankSlots(1, [(0, 0, 0, 0)] * 2, [0, 0], slow)
    timed = simulate(two, params)
    r = simulate(two, params, banks=slots)
    assert r.finish[0] == timed.finish[0]
    assert r.finish[1] == r.finish[0] + slow + flits[transfers[i].chunk] - 1


def test_bank_slots_refuse_a_wrong_count_and_other_link_orders():
    plan, run, schedule = _routed("torus:4x4", "ring", 49)
    banks = _one_bank(run, plan)
    with pytest.raises(ConfigError, match="bank slots give 1 residues"):
        simulate(schedule, plan.timing, banks=banks._replace(residues=[(0, 0, 0, 0)]))
    with pytest.raises(ConfigError, match="link order 'timetable', not 'fcfs'"):
        simulate(schedule, dataclasses.replace(plan.timing, link_order="fcfs"), banks=banks)


def test_the_plan_expects_the_nis_run():
    # the plan's expected cycles are the second pass over its own timetable
    plan, run, schedule = _routed("machine:cloud-v100", "multitree", 200, dtype="float32")
    banks = bank_slots(run.lowered, plan.config, plan.timing)
    assert banks.banks == plan.config.buffer_banks > 1
    r = simulate(schedule, plan.timing, run.lowered.staged, banks)
    assert r.cycles == run.expected_cycles > simulate(schedule, plan.timing,
                                                      run.lowered.staged).cycles


def test_two_lanes_reducing_into_one_chunk_meet_once():
    # dbtree on the routed torus: two children reduce into their parent's chunk in one step,
    # on two ports whose bank slots put one lane a cycle behind the other: that one waits a
    # rotation (the interlock, hdl.ordering); alone, each takes its own time
    plan, run, schedule = _routed("torus:4x4", "dbtree", 389)
    params, banks = plan.timing, bank_slots(run.lowered, plan.config, plan.timing)
    transfers = [t for _, t in schedule.transfers()]
    first = range(len(schedule.steps[0]))
    pairs = [(i, j) for i in first for j in first if i < j
             and (transfers[i].dst, transfers[i].chunk) == (transfers[j].dst, transfers[j].chunk)
             and banks.receive_ports[i] != banks.receive_ports[j]]
    met = 0
    flits = -(-np.diff(schedule.bounds) * params.element_bytes // params.flit_bytes)
    for i, j in pairs:
        def alone(k):
            one = dataclasses.replace(schedule, steps=[[transfers[k]]])
            slots = BankSlots(banks.banks, [banks.residues[k]], [banks.receive_ports[k]],
                              banks.write_delay)
            return int(simulate(one, params, banks=slots).finish[0])
        both = dataclasses.replace(schedule, steps=[[transfers[i], transfers[j]]])
        slots = BankSlots(banks.banks, [banks.residues[i], banks.residues[j]],
                          [banks.receive_ports[i], banks.receive_ports[j]], banks.write_delay)
        got = simulate(both, params, banks=slots).finish.tolist()
        want = [alone(i), alone(j)]
        lag = want[0] - want[1]         # pops of i after j's, flit by flit (equal sizes)
        assert flits[transfers[i].chunk] == flits[transfers[j].chunk]
        if 1 <= lag <= banks.write_delay:
            want[0] += banks.banks
        elif 1 <= -lag <= banks.write_delay:
            want[1] += banks.banks
        met += want != [alone(i), alone(j)]
        assert got == want, (i, j)
    assert pairs and met
