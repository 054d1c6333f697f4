"""``allreduce-rtl coarse --rtl``: the COARSE system in RTL on a workload's tensors.

For each scheme, ``coarse`` (dual synchronisation: the first m layers GPU to GPU, m chosen by
``golden_model.coarse.DualSync`` on the whole model) and ``coarse-proxies-only`` (m = 0), the
chosen layers that go through the proxies run on ``hdl.coarse.CoarseSystem`` in a simulator
(``tb.coarse.run.SystemBuild``): every worker's every shard is checked bit for bit against
``golden_model.coarse.functional.synchronise``, and the cycles against the hardware timing
model (``golden_model.coarse.hardware``). Both schemes run on one hardware build; where no
chosen layer is below m they are the same run (reported twice).

Bad input raises ``ConfigError`` (exit 2); a failed build or simulator raises
``EnvironmentFailure`` (exit 1); a run that does not verify exits 1 after the report is written.
"""

import gc
import json
import warnings

from amaranth.hdl import UnusedElaboratable

from golden_model.coarse import DualSync
from golden_model.coarse.functional import line_elements
from golden_model.coarse.routing import model_tensors, routing_table
from golden_model.errors import ConfigError
from golden_model.provenance import stamp

from .errors import EnvironmentFailure
from .output import atomic_write_many, check_writable_file, ensure_folder, format_table

__all__ = ["RTL_SYSTEM", "RTL_LAYERS", "RTL_DTYPES", "ORDERS", "select_layers",
           "cmd_coarse_rtl"]

#: The workers' shard orders (``tb.coarse.system.ORDERS``, repeated here so that the parser
#: does not import the testbench).
ORDERS = ("table", "mixed")

#: The default system: 4 workers on 2 devices, latencies of tens of cycles and a threshold
#: that partitions the larger tensors, so that shards of several sizes run in a minute.
RTL_SYSTEM = "coarse:W=4,M=2,lat_local=0.01,lat_remote=0.02,threshold=8KB"
#: The default workload subset: ResNet-50's first convolution (cut into shards), a 1x1
#: convolution and three batch normalisations (latency proxy).
RTL_LAYERS = ("conv1", "conv1.bn", "layer1.0.conv1", "layer1.0.conv1.bn", "layer1.0.conv3.bn")
RTL_DTYPES = ("float32", "int32")
#: Cycles without progress after which a run is reported stalled.
WATCHDOG = 2000
#: Most 64-byte lines one worker may push in a run (the default subset is 892): a Python
#: call per cycle in the testbench runs about 2,000 cycles a second.
MAX_LINES = 20_000
COLUMNS = [("scheme", "scheme", "{}"), ("m", "m", "{}"), ("tensors", "tensors", "{}"),
           ("shards", "shards", "{}"), ("rtl_cycles", "RTL cycles", "{:,}"),
           ("model_cycles", "model cycles", "{:,}"), ("rtl_over_model", "RTL/model", "{:.3f}"),
           ("status", "verified", "{}")]


def select_layers(model, text):
    """``(layer, name, elements)`` of the layers ``text`` names (comma-separated names, or
    ``all``), in the clients' issue order (``model_tensors``).

    Raises
    ------
    ConfigError
        If a name is empty, not a layer of the model with parameters, or repeated.
    """
    tensors = model_tensors(model)
    if text.strip() == "all":
        return tensors
    by_name = {name: (layer, name, n) for layer, name, n in tensors}
    names = [x.strip() for x in text.split(",")]
    if not all(names):
        raise ConfigError(f"--layers {text!r} has an empty name: give layer names separated by "
                          f"commas, or 'all'")
    for name in names:
        if name not in by_name:
            near = [n for n in by_name if name and name in n][:5]
            raise ConfigError(f"--layers: {name!r} is not a layer of {model.name} with "
                              f"parameters" + (f" (did you mean {', '.join(near)}?)" if near
                                               else f"; its first ones are "
                                               f"{', '.join(list(by_name)[-4:][::-1])}"))
    if len(set(names)) != len(names):
        raise ConfigError(f"--layers {text!r} names a layer twice")
    return [t for t in tensors if t[1] in names]


def _schemes(model, config, tensors):
    """``[(scheme, m, direct layers)]`` and dual synchronisation's m."""
    m = DualSync(model, config).best().m
    direct = sorted(t[0] for t in tensors if t[0] < m)
    return [("coarse", m, direct), ("coarse-proxies-only", 0, [])], m


def _scenarios(config, tensors, etype, schemes, args):
    from tb.coarse.system import ORDERS as TB_ORDERS, SystemScenario  # noqa: PLC0415
    assert TB_ORDERS == ORDERS
    common = dict(seed=args.seed, orders=args.orders, shared_queue=args.shared_queue)
    per_line = line_elements(etype.dtype)
    lines = sum(-(-s.elements // per_line) for r in routing_table(config, 0, tensors)
                for s in r.shards)
    if lines > MAX_LINES:
        raise ConfigError(f"the layers need {lines:,} lines of 64 bytes per worker, more than "
                          f"the {MAX_LINES:,} a run takes; choose fewer --layers")
    refused = None
    with warnings.catch_warnings():           # built to check its limits, not elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        try:
            full = SystemScenario(config, tensors, etype, **common)
            full.system()                     # the hardware's limits (W, slots, sizes)
        except ValueError as exc:
            refused = str(exc)
        # with the exception gone, a half-built system is freed here, under the filter
        gc.collect()
    if refused is not None:
        raise ConfigError(f"the COARSE system {config.spec} cannot be built: {refused}")
    out = {}
    for scheme, _, direct in schemes:
        try:
            out[scheme] = (full if not direct else
                           SystemScenario(config, tensors, etype, direct=direct,
                                          sizes_from=full, **common))
        except ValueError as exc:
            out[scheme] = str(exc)        # e.g. every chosen layer is direct
    return full, out


def cmd_coarse_rtl(args, config, model):
    from golden_model.elements import element_type  # noqa: PLC0415
    from tb.build import BuildError  # noqa: PLC0415
    from tb.toolchain import ToolchainError  # noqa: PLC0415
    from tb.coarse.run import SystemBuild  # noqa: PLC0415

    from .plan import model_cycles as plan_cycles  # noqa: PLC0415
    tensors = select_layers(model, args.layers or ",".join(RTL_LAYERS))
    etype = element_type(args.dtype)
    schemes, m = _schemes(model, config, tensors)
    out = ensure_folder(args.out or "out/coarse-rtl")
    check_writable_file(out / "report.json")
    check_writable_file(out / "coarse_system.v")
    full, scenarios = _scenarios(config, tensors, etype, schemes, args)
    try:
        build = SystemBuild(args.simulator, full, build_root=args.build_dir)
        verilog = build.network_file().read_text()
        build.build()
    except (BuildError, ToolchainError) as exc:
        raise EnvironmentFailure(str(exc)) from None
    rows, runs = [], {}
    for scheme, m_s, direct in schemes:
        s = scenarios[scheme]
        row = {"scheme": scheme, "m": m_s, "direct_layers": direct}
        if isinstance(s, str):
            rows.append({**row, "tensors": 0, "shards": 0, "status": "n/a", "note": s})
            continue
        key = tuple(direct)
        if key not in runs:
            build.scenario = s
            runs[key] = build.run_system(seed=args.seed, watchdog=WATCHDOG)
        r = runs[key]
        if "cycles" not in r:
            raise EnvironmentFailure(f"the {args.simulator} run of {scheme} ended without a "
                                     f"report: {r['failure'] or 'no report'} (log {r['log']})")
        model_cycles = s.model_cycles(plan_cycles)
        verified = not r["failure"] and not r["mismatches"] and not r["stall"] and not r["error"]
        rows.append({**row, "tensors": len({x[0] for x in s.shards}), "shards": len(s.shards),
                     "rtl_cycles": r["cycles"], "model_cycles": model_cycles,
                     "rtl_over_model": (None if r["stall"] else
                                        round(r["cycles"] / model_cycles, 4)),
                     "verified": verified, "stalled": bool(r["stall"]),
                     "status": "yes" if verified else "STALLED" if r["stall"] else "NO",
                     "mismatches": r["mismatches"], "ring_cycles": r["ring_cycles"],
                     "stall": r["stall"], "seconds": round(r["seconds"], 1)})
    report = {
        "system": config.spec, "model": model.name, "layers": [t[1] for t in tensors],
        "subset": args.layers is None, "dtype": etype.name, "simulator": args.simulator,
        "orders": args.orders,
        "queues": (f"naive: one FIFO of {args.shared_queue} entries shared by the clients"
                   if args.shared_queue else "coarse: a queue per client, a slot per tensor"),
        "dual_sync_m": m, "hardware": full.hardware(), "schemes": rows,
        "verified": all(r.get("verified", True) for r in rows),
    }
    atomic_write_many({out / "report.json": json.dumps(stamp(report), indent=1) + "\n",
                       out / "coarse_system.v": verilog})
    if args.json:
        print(json.dumps(stamp(report), indent=1))
    else:
        _print(report, out)
    if not report["verified"]:
        stalls = [r["stall"]["message"] for r in rows if r.get("stall", {}).get("message")]
        raise EnvironmentFailure(f"stalled: {stalls[0]}" if stalls else
                                 "a scheme did not verify against the golden model (see "
                                 f"{out / 'report.json'})")
    return 0


def _print(report, out):
    hw = report["hardware"]
    subset = " (the default subset; --layers all for every layer)" if report["subset"] else ""
    print(f"{report['model']}: {len(report['layers'])} layers{subset}: "
          f"{', '.join(report['layers'])}")
    print(f"system {report['system']}: {hw['workers']} worker CXL.mem ports, "
          f"{hw['devices']} memory devices ({hw['slots']} tensor slots, {hw['queue_lines']} "
          f"queue lines per client), device ring of {hw['ring_link_latency']}-cycle links; "
          f"{report['dtype']} in {report['simulator']}")
    print(f"queues {report['queues']}; {report['orders']} shard orders")
    print(format_table(report["schemes"], COLUMNS))
    for r in report["schemes"]:
        if r.get("note"):
            print(f"{r['scheme']}: {r['note']}")
    print(f"model: {hw['model']}")
    print(f"wrote {out / 'report.json'} and {out / 'coarse_system.v'}")
