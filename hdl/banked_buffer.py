"""The NI's buffer as banks of one-read, one-write memories, served in a fixed rotation.

Why: the NI needs 2P reads (P send engines, P reduction lanes) and P writes (the lanes) per cycle,
plus the host. No block RAM or SRAM macro has that many ports; a memory described with them
becomes flip-flops and multiplexers. Here the ``buffer_depth`` flits are spread over
``K = buffer_banks(P, copies)`` banks, each a ``hdl.ram.RAM`` with one write port and one
synchronous read port (block RAM on iCE40 and ECP5, an SRAM macro in an ASIC flow; ``bare``: no
logic defines a read of the word written in the same cycle, which the NI never does),
address-interleaved: flit ``a`` is word ``a // K`` of bank ``a % K``.

Copies (``NIConfig.buffer_copies``), the architect's trade between logic and memory:

* **1**: K = the next power of two >= 2P; all 2P read clients share the banks' read ports.
* **2**: every bank is two memories with the same contents (every write goes to both): the
  send engines read copy 0 and the lanes copy 1, so K = the next power of two >= P. Twice the
  memory bits, but the rotators that route addresses and data between clients and banks have
  half the clients and one level fewer each (on iCE40, 4 ports and 128-bit flits: about 2,800
  LUTs fewer), and a client waits at most K - 1 = 3 cycles for its bank instead of 7. The host
  then writes through lane 0's write client, which is idle whenever the host may write.

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
host's reads while the NI is idle), the lanes from :func:`lane_read_client`; write: the lanes
from :func:`lane_write_client`, the host 0 (with two copies that is lane 0's). Unused clients
are tied off.

Worst case of a MultiTree schedule: K - 1 cycles before a message's first payload flit leaves
its sender, K - 1 before its first flit is written at the receiver, and after any stall of a
stream (a credit in credit mode, a sub-message grant in message mode) up to K - 1 more.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .config import BUFFER_COPIES, buffer_banks
from .ram import RAM, verilog_module_name

__all__ = ["BankedBuffer", "rotate", "bank_name", "bank_depth", "BANK_MODULE",
           "lane_read_client", "lane_write_client"]


#: Every bank: one write port and one read port, not transparent (``hdl.ram.RAM``), of a kind of
#: its own, so that under ``verilog_rams()`` the banks have a Verilog module of their own,
#: :data:`BANK_MODULE`, which testbench backdoors extend (``tb.harness.Backdoor``).
_BANK_RAM = {"num_write": 1, "transparency": [()], "kind": "buffer_bank", "bare": True}
BANK_MODULE = verilog_module_name(**_BANK_RAM)


def bank_name(b, copy=0):
    """The submodule name of copy ``copy`` of bank ``b`` (``bank<b>``, copies above 0
    ``bank<b>_copy<copy>``), which holds flits ``a`` with ``a % K == b`` as its word ``a // K``."""
    return f"bank{b}" if copy == 0 else f"bank{b}_copy{copy}"


def lane_read_client(num_ports, copies):
    """Read client of reduction lane 0 (lane i is this + i): P with one copy, K with two (the
    first client of copy 1)."""
    return num_ports if copies == 1 else buffer_banks(num_ports, copies)


def lane_write_client(num_ports, copies):
    """Write client of reduction lane 0 (lane i is this + i): P with one copy (0 is the host's),
    0 with two (the host shares it)."""
    return num_ports if copies == 1 else 0


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
    """``depth`` flits in ``buffer_banks(num_ports, copies)`` rotating 1R1W banks, ``copies``
    of each (module docstring).

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
    copies : int
        1 or 2 (module docstring).

    Members
    -------
    restart : ``In(1)``
        Pulse: ``phase`` is 0 in the next cycle.
    read_slot : ``Out(log2 K).array(copies * K)``
        The bank read client c owns this cycle, ``(c % K + phase) % K`` (``phase``: the
        rotation's position, 0 in the cycle after ``restart``; clients ``g K .. g K + K - 1``
        read copy g); counters, so that no client adds constants.
    write_slot : ``Out(log2 K).array(K)``
        The bank write client w owns, ``(w + phase - write_delay) % K``.
    read : ``Out(ReadPort.Signature(addr_width, flit_width)).array(copies * K)``
        ``en`` and ``addr`` (full flit address; it must be in the client's bank this cycle),
        ``data`` one cycle later.
    write : ``Out(WritePort.Signature(addr_width, flit_width)).array(K)``
        ``en``, ``addr`` (in the client's write bank this cycle), ``data``.

    Raises
    ------
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, *, num_ports, depth, flit_width, write_delay, copies=1):
        for name, value, lo in (("num_ports", num_ports, 1), ("depth", depth, 2),
                                ("flit_width", flit_width, 1), ("write_delay", write_delay, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise ValueError(f"banked buffer {name} must be an integer >= {lo}, not {value!r}")
        if copies not in BUFFER_COPIES or isinstance(copies, bool):
            raise ValueError(f"banked buffer copies must be one of {BUFFER_COPIES}, not "
                             f"{copies!r}")
        self.num_ports, self.depth, self.write_delay = num_ports, depth, write_delay
        self.copies = copies
        self.num_banks = k = buffer_banks(num_ports, copies)
        self.bank_bits = ceil_log2(k)
        self.bank_depth = bank_depth(depth, k)
        aw = ceil_log2(depth)
        self._flit = unsigned(flit_width)
        super().__init__({
            "restart": In(1),
            "read_slot": Out(self.bank_bits).array(copies * k),
            "write_slot": Out(self.bank_bits).array(k),
            "read": Out(memory.ReadPort.Signature(addr_width=aw, shape=self._flit))
                    .array(copies * k),
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
        for c in range(self.copies * k):
            m.d.comb += self.read_slot[c].eq(count[f"read_slot{c % k}"])
        for c in range(k):
            m.d.comb += self.write_slot[c].eq(count[f"write_slot{c}"])
        # Bank b (every copy) is written by client (b - phase + d) % K; copy g of bank b is
        # read by client g K + (b - phase) % K.
        # A client address's bits above the bank select; a buffer of at most K words has none,
        # and its banks' address is then 0 (one bit: Amaranth has no empty slice).
        wa = max(len(self.write[0].addr) - bits, 1)

        def in_bank(addr):
            return addr[bits:] if len(addr) > bits else Const(0, 1)

        wr_req = rotate(m, [Cat(w.en, in_bank(w.addr), w.data) for w in self.write], wneg,
                        "wr_req")
        prev = Signal(bits)
        m.d.sync += prev.eq(count["phase"])
        for g in range(self.copies):
            clients = self.read[g * k:(g + 1) * k]
            rd_req = rotate(m, [Cat(r.en, in_bank(r.addr)) for r in clients], neg,
                            f"rd_req{g}")
            banks = []
            for b, (rq, wq) in enumerate(zip(rd_req, wr_req)):
                bank = RAM(shape=self._flit, depth=self.bank_depth, **_BANK_RAM)
                m.submodules[bank_name(b, g)] = bank
                banks.append(bank)
                rd, wr = bank.read[0], bank.write[0]
                m.d.comb += [rd.en.eq(rq[0]), rd.addr.eq(rq[1:]),
                             wr.en.eq(wq[0]), wr.addr.eq(wq[1:1 + wa]), wr.data.eq(wq[1 + wa:])]
            # Client c's data (read in the previous cycle) is bank (c + phase_prev) % K's output.
            data = rotate(m, [bank.read[0].data for bank in banks], prev, f"rd_data{g}")
            for r, d in zip(clients, data):
                m.d.comb += r.data.eq(d)
        return m
