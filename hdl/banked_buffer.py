"""The NI's buffer as banks of one-read, one-write memories, served in a fixed rotation.

Why: the NI needs 2P reads (P send engines, P reduction lanes) and P writes (the lanes) per cycle,
plus the host. No block RAM or SRAM macro has that many ports; a memory described with them
becomes flip-flops and multiplexers. Here the ``buffer_depth`` flits are spread over
``K = buffer_banks(P)`` banks (the next power of two >= 2P), each a ``hdl.ram.RAM`` with one
write port and one synchronous read port (block RAM on iCE40 and ECP5, an SRAM macro in an ASIC
flow), address-interleaved: flit ``a`` is word ``a // K`` of bank ``a % K``.

Bank mapping (conflict-free, deterministic): a rotation counter ``phase`` (0 in the cycle after
``restart``, then +1 per cycle mod K) gives read client ``c`` bank ``(c + phase) % K`` in every
cycle and write client ``w`` bank ``(w + phase - write_delay) % K``. Every bank serves exactly one
client per cycle, so no two clients ever meet at a bank and nothing is arbitrated: cycle counts
depend only on when each client is ready, never on the other clients' traffic or the host's
back-pressure. A client streaming consecutive addresses needs consecutive banks in consecutive
cycles, which is what the rotation gives: once aligned it runs at one flit per cycle, stalls
only when it wants to. The cost is alignment: a client that starts (or resumes) at flit ``a``
waits until its slot reaches bank ``a % K``, at most ``K - 1`` cycles. A reduction lane reads a
flit in cycle t and writes it ``write_delay`` cycles later, which the write rotation's offset
makes its write slot for that very bank. Clients: read ``0..P-1`` the send engines (0 also the
host's reads while the NI is idle), ``P..2P-1`` the lanes; write ``P..2P-1`` the lanes, 0 the
host. Unused clients are tied off.

Worst case of a MultiTree schedule: K - 1 cycles before a message's first payload flit leaves
its sender, K - 1 before its first flit is written at the receiver, and after any stall of a
stream (a credit in credit mode, a sub-message grant in message mode) up to K - 1 more.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .config import buffer_banks
from .ram import RAM, verilog_module_name

__all__ = ["BankedBuffer", "rotate", "bank_name", "bank_depth", "BANK_MODULE"]


#: Every bank: one write port and one read port, not transparent (``hdl.ram.RAM``), of a kind of
#: its own, so that under ``verilog_rams()`` the banks have a Verilog module of their own,
#: :data:`BANK_MODULE`, which testbench backdoors extend (``tb.harness.Backdoor``).
_BANK_RAM = {"num_write": 1, "transparency": [()], "kind": "buffer_bank", "bare": True}
BANK_MODULE = verilog_module_name(**_BANK_RAM)


def bank_name(b):
    """The submodule name of bank ``b`` (``bank<b>``), which holds flits ``a`` with
    ``a % K == b`` as its word ``a // K``."""
    return f"bank{b}"


def bank_depth(depth, num_banks):
    """Words per bank of a ``depth``-flit buffer in ``num_banks`` banks (at least 2)."""
    return max(2, -(-depth // num_banks))


def rotate(m, words, amount, name):
    """``out[i] = words[(i + amount) % K]`` for ``K = len(words)`` (a power of two): a barrel
    rotator of ``log2 K`` levels of 2:1 multiplexers. Returns the list of output signals."""
    k = len(words)
    for level in range(ceil_log2(k)):
        step = 1 << level
        nxt = []
        for i in range(k):
            s = Signal.like(words[i], name=f"{name}_l{level}_{i}")
            m.d.comb += s.eq(Mux(amount[level], words[(i + step) % k], words[i]))
            nxt.append(s)
        words = nxt
    return words



class BankedBuffer(wiring.Component):
    """``depth`` flits in ``buffer_banks(num_ports)`` rotating 1R1W banks (module docstring).

    Parameters
    ----------
    num_ports : int
        NI ports P (the clients are sized from it).
    depth : int
        Flits (at least 2).
    flit_width : int
        Bits per flit.
    write_delay : int
        Cycles from a lane's read of a flit to its write of it (the reduction unit's ``1 +`` adder
        latency), at least 1.

    Members
    -------
    restart : ``In(1)``
        Pulse: ``phase`` is 0 in the next cycle.
    read_slot, write_slot : ``Out(log2 K).array(K)``
        The bank read client c owns this cycle, ``(c + phase) % K`` (``phase``: the rotation's
        position, 0 in the cycle after ``restart``), and the bank write client w
        owns, ``(w + phase - write_delay) % K`` (counters, so that no client adds constants).
    read : ``Out(ReadPort.Signature(addr_width, flit_width)).array(K)``
        ``en`` and ``addr`` (full flit address; it must be in the client's bank this cycle),
        ``data`` one cycle later.
    write : ``Out(WritePort.Signature(addr_width, flit_width)).array(K)``
        ``en``, ``addr`` (in the client's write bank this cycle), ``data``.

    Raises
    ------
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, *, num_ports, depth, flit_width, write_delay):
        for name, value, lo in (("num_ports", num_ports, 1), ("depth", depth, 2),
                                ("flit_width", flit_width, 1), ("write_delay", write_delay, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise ValueError(f"banked buffer {name} must be an integer >= {lo}, not {value!r}")
        self.num_ports, self.depth, self.write_delay = num_ports, depth, write_delay
        self.num_banks = k = buffer_banks(num_ports)
        self.bank_bits = ceil_log2(k)
        self.bank_depth = bank_depth(depth, k)
        aw = ceil_log2(depth)
        self._flit = unsigned(flit_width)
        super().__init__({
            "restart": In(1),
            "read_slot": Out(self.bank_bits).array(k),
            "write_slot": Out(self.bank_bits).array(k),
            "read": Out(memory.ReadPort.Signature(addr_width=aw, shape=self._flit)).array(k),
            "write": Out(memory.WritePort.Signature(addr_width=aw, shape=self._flit)).array(k),
        })

    def elaborate(self, platform):
        m = Module()
        k, bits = self.num_banks, self.bank_bits
        # Counters that all advance by one per cycle and restart at their offset: the phase,
        # every client's bank, and the two rotation amounts (-phase and write_delay - phase).
        starts = {"phase": 0, "neg": 0, "wneg": self.write_delay % k}
        starts.update({f"read_slot{c}": c for c in range(k)})
        starts.update({f"write_slot{c}": (c - self.write_delay) % k for c in range(k)})
        count = {}
        for name, start in starts.items():
            sig = count[name] = Signal(bits, name=f"{name}_count", init=start)
            step = sig - 1 if name in ("neg", "wneg") else sig + 1
            with m.If(self.restart):
                m.d.sync += sig.eq(start)
            with m.Else():
                m.d.sync += sig.eq(step[:bits])
        neg, wneg = count["neg"], count["wneg"]
        for c in range(k):
            m.d.comb += [self.read_slot[c].eq(count[f"read_slot{c}"]),
                         self.write_slot[c].eq(count[f"write_slot{c}"])]
        banks = []
        for b in range(k):
            bank = RAM(shape=self._flit, depth=self.bank_depth, **_BANK_RAM)
            m.submodules[bank_name(b)] = bank
            banks.append(bank)
        # Bank b is read by client (b - phase) % K and written by client (b - phase + d) % K.
        rd_req = rotate(m, [Cat(r.en, r.addr[bits:]) for r in self.read], neg, "rd_req")
        wr_req = rotate(m, [Cat(w.en, w.addr[bits:], w.data) for w in self.write], wneg, "wr_req")
        wa = len(self.write[0].addr) - bits
        for bank, rq, wq in zip(banks, rd_req, wr_req):
            rd, wr = bank.read[0], bank.write[0]
            m.d.comb += [rd.en.eq(rq[0]), rd.addr.eq(rq[1:]),
                         wr.en.eq(wq[0]), wr.addr.eq(wq[1:1 + wa]), wr.data.eq(wq[1 + wa:])]
        # Client c's data (read in the previous cycle) is bank (c + phase_prev) % K's output.
        prev = Signal(bits)
        m.d.sync += prev.eq(count["phase"])
        data = rotate(m, [bank.read[0].data for bank in banks], prev, "rd_data")
        for r, d in zip(self.read, data):
            m.d.comb += r.data.eq(d)
        return m
