"""The banked buffer's fixed rotation (``hdl.banked_buffer``), checked exhaustively: every
client, every phase of the rotation, restarts at every offset, with all K read clients and all K
write clients busy in every cycle (the worst case of bank conflicts: 2K requests per cycle on K
banks). A Python model of the memory, written by the rule in the module docstring, predicts
every read."""

import numpy as np
import pytest

from hdl.banked_buffer import BankedBuffer
from hdl.config import buffer_banks
from hdl_host import run_testbench


@pytest.mark.parametrize("ports, write_delay, copies", [
    (1, 1, 1), (2, 1, 1), (2, 3, 1), (4, 2, 1), (2, 1, 2), (4, 2, 2), (3, 3, 2),
    pytest.param(5, 6, 1, marks=pytest.mark.slow),     # K = 16: 30 s
])
def test_every_client_owns_its_rotation_slot_and_reads_the_last_write(ports, write_delay,
                                                                      copies):
    k = buffer_banks(ports, copies)
    rows = 3
    depth = k * rows
    dut = BankedBuffer(num_ports=ports, depth=depth, flit_width=16, write_delay=write_delay,
                       copies=copies)
    rng = np.random.default_rng(ports * 10 + write_delay + copies)
    # Restart after every offset 0 .. K-1 from the previous one, so every phase meets every
    # client after every kind of restart.
    restarts = set()
    t = 3
    for gap in list(range(1, 2 * k + 1)) * 2:
        t += gap
        restarts.add(t)
    cycles = t + 2 * k
    memory = {}

    async def bench(ctx):
        phase = None            # unknown until the first restart
        for t in range(cycles):
            restart = t in restarts
            ctx.set(dut.restart, int(restart))
            if phase is not None:
                read_slots = [ctx.get(dut.read_slot[c]) for c in range(copies * k)]
                write_slots = [ctx.get(dut.write_slot[c]) for c in range(k)]
                assert read_slots == [(c + phase) % k for c in range(k)] * copies
                assert write_slots == [(c + phase - write_delay) % k for c in range(k)]
                assert sorted(write_slots) == list(range(k))
                for g in range(copies):     # each copy's clients cover its banks
                    assert sorted(read_slots[g * k:(g + 1) * k]) == list(range(k))
                writes = {}
                for c in range(k):          # every write client writes, in its bank
                    a = write_slots[c] + k * int(rng.integers(0, rows))
                    v = int(rng.integers(0, 1 << 16))
                    ctx.set(dut.write[c].en, 1)
                    ctx.set(dut.write[c].addr, a)
                    ctx.set(dut.write[c].data, v)
                    writes[a] = v
                reads = []
                for c in range(copies * k):     # every read client reads, in its bank
                    a = read_slots[c] + k * int(rng.integers(0, rows))
                    ctx.set(dut.read[c].en, 1)
                    ctx.set(dut.read[c].addr, a)
                    reads.append((c, a, memory.get(a)))    # a read sees the old word
            else:
                writes, reads = {}, []
            await ctx.tick()
            for c, a, want in reads:        # data one cycle after the request
                if want is not None:
                    assert ctx.get(dut.read[c].data) == want, (t, c, a)
            memory.update(writes)
            phase = 0 if restart else (None if phase is None else (phase + 1) % k)

    run_testbench(dut, bench)


def test_parameters_out_of_range_are_refused():
    with pytest.raises(ValueError, match="write_delay must be an integer >= 1, not 0"):
        BankedBuffer(num_ports=2, depth=16, flit_width=8, write_delay=0)
    with pytest.raises(ValueError, match="num_ports must be an integer >= 1, not True"):
        BankedBuffer(num_ports=True, depth=16, flit_width=8, write_delay=1)
