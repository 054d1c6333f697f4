"""Build the router network for Icarus or Verilator once per configuration and run traffic on it.

Reuses ``tb.runner``'s machinery (build directories keyed on ``tb.toolchain.toolchain_key()``,
file locks so pytest-xdist workers share builds, cocotb's Verilator runner without
``--public-flat-rw``, the Verilator run-time object cache ``tb.objcache`` and the PCH make-variable
fix of the 5.48.0 wheel). A build lives under
``build/<toolchain key>/router/<sim>/<topology>-<hash>/``; the hash covers the network
parameters and the sources of ``hdl/``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
import time

from tb.runner import REPO, SIMULATORS, _locked, _tail, run_build, simulator_runner
from tb.toolchain import toolchain_key

__all__ = ["RouterBuild", "RouterRun", "TEST_MODULE", "TOP"]

TEST_MODULE = "tb.router.cocotb_router"
TOP = "router_network"
PARAMS_ENV = "ROUTER_TB_PARAMS"

#: Only the top's ports are visible to cocotb (see ``tb.runner._PUBLIC_VLT``).
_PUBLIC_VLT = f"""`verilator_config
public_flat_rw -module "{TOP}" -var "clk"
public_flat_rw -module "{TOP}" -var "rst"
public_flat_rw -module "{TOP}" -var "error"
public_flat_rw -module "{TOP}" -var "inject__*"
public_flat_rw -module "{TOP}" -var "eject__*"
"""


def _sources_digest():
    h = hashlib.sha256()
    for path in sorted((REPO / "hdl").rglob("*.py")):
        with contextlib.suppress(OSError):
            h.update(str(path.relative_to(REPO)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@dataclasses.dataclass
class RouterRun:
    """Results of one simulation: per scenario dicts (see ``tb.router.cocotb_router``)."""
    ok: bool
    scenarios: list
    message: str
    wall_s: float
    log_file: pathlib.Path


class RouterBuild:
    """One simulator build of ``RouterNetwork(topology, **network_args)``.

    Parameters
    ----------
    topology : golden_model.topology.Topology
    sim : {"icarus", "verilator"}
    network_args : dict
        Keyword arguments of ``hdl.router.RouterNetwork``.
    cxx_opt : str, optional
        Verilator C++ optimisation (``OPT_FAST``/``OPT_SLOW``), e.g. ``"-O1"``.
    """

    def __init__(self, topology, sim="verilator", network_args=None, *, cxx_opt=None,
                 build_root=None):
        if sim not in SIMULATORS:
            raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
        self.topology, self.sim = topology, sim
        self.network_args = dict(network_args or {})
        self.cxx_opt = cxx_opt
        self.build_root = pathlib.Path(build_root or os.environ.get("ALLREDUCE_BUILD_ROOT")
                                       or REPO / "build")
        ident = {"topology": topology.spec, "args": self.network_args, "sources": _sources_digest(),
                 "cxx_opt": cxx_opt}
        self.hash = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        self.build_dir = (self.build_root / toolchain_key() / "router" / sim
                          / f"{topology.spec.replace(':', '-')}-{self.hash}")
        self._runner = None
        self._count = 0
        self.build_seconds = 0.0

    def network(self):
        from hdl.router import RouterNetwork  # noqa: PLC0415
        return RouterNetwork(self.topology, **self.network_args)

    def _get_runner(self):
        if self._runner is None:
            self._runner = simulator_runner(self.sim)
        return self._runner

    def verilog(self):
        """Generate the Verilog (once) and return its path."""
        from hdl.router import to_verilog  # noqa: PLC0415
        out = self.build_dir / f"{TOP}.v"
        if not out.is_file():
            self.build_dir.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            to_verilog(self.network(), tmp, name=TOP)
            os.replace(tmp, out)
        return out

    def build(self):
        stamp = self.build_dir / "build.ok"
        with _locked(self.build_dir.with_suffix(".lock")):
            if stamp.is_file():
                self._get_runner()
                return self
            t0 = time.perf_counter()
            sources = [self.verilog()]
            build_args = []
            make_vars = []
            if self.sim == "verilator":
                from cocotb_tools.runner import VerilatorControlFile  # noqa: PLC0415
                from hdl.router.network import router_modules  # noqa: PLC0415
                vlt = self.build_dir / "public.vlt"
                hier = "".join(f'hier_block -module "{mod}"\n'
                               for mod in router_modules(sources[0].read_text(), TOP))
                vlt.write_text(_PUBLIC_VLT + hier)
                sources.append(VerilatorControlFile(vlt))
                # --hierarchical: the router module (one definition per port layout, one
                # instance per router) is verilated and compiled once as a hierarchical block
                # instead of once per instance.
                build_args = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "--hierarchical"]
                make_vars = [f"-j{min(4, os.cpu_count() or 1)}"]
            run_build(self._get_runner(), self.sim, sources, TOP, self.build_dir, self.build_root,
                      what=f"the router network on {self.topology.spec}",
                      build_args=build_args, make_vars=make_vars, cxx_opt=self.cxx_opt)
            self.build_seconds = time.perf_counter() - t0
            stamp.write_text(f"{self.build_seconds:.1f}\n")
        return self

    def run(self, scenarios, *, stall_cycles=3000, name="run"):
        """Run ``scenarios`` (``TrafficSpec``s) in one simulation; returns a ``RouterRun``."""
        self.build()
        self._count += 1
        run_dir = self.build_dir / "runs" / f"{name}-{os.getpid()}-{self._count}"
        run_dir.mkdir(parents=True, exist_ok=True)
        # traffic patterns see terminals on a grid; fat-tree/BiGraph: one row of endpoints
        rows, cols = self.topology.grid or (1, self.topology.num_nodes)
        conc = self.network_args.get("concentration", 1)
        params = {
            "num_terminals": self.topology.num_nodes * conc, "rows": rows, "cols": cols,
            "concentration": conc, "flit_width": self.network_args.get("flit_width", 128),
            "stall_cycles": stall_cycles, "result_file": str(run_dir / "result.json"),
            "scenarios": [dataclasses.asdict(s) for s in scenarios],
        }
        pfile = run_dir / "params.json"
        pfile.write_text(json.dumps(params, indent=1))
        log = run_dir / "sim.log"
        message = ""
        t0 = time.perf_counter()
        try:
            self._get_runner().test(test_module=TEST_MODULE, hdl_toplevel=TOP,
                                    hdl_toplevel_lang="verilog", build_dir=self.build_dir,
                                    test_dir=run_dir, results_xml=str(run_dir / "results.xml"),
                                    extra_env={PARAMS_ENV: str(pfile)}, log_file=log)
        except SystemExit as exc:
            message = f"cocotb test failed (exit {exc.code})"
        except RuntimeError as exc:
            message = f"simulator failed ({exc})"
        wall = time.perf_counter() - t0
        try:
            results = json.loads((run_dir / "result.json").read_text())["scenarios"]
        except (OSError, ValueError, KeyError):
            results = []
        ok = (not message and len(results) == len(scenarios)
              and all(r["status"] == "done" for r in results))
        if not ok:
            bad = [r for r in results if r["status"] != "done"]
            detail = (f"{bad[0]['name']}: {bad[0]['status']}: {bad[0]['message']}" if bad
                      else f"log {log}:\n{_tail(log)}")
            message = f"{message}; {detail}" if message else detail
        return RouterRun(ok=ok, scenarios=results, message=message, wall_s=wall, log_file=log)
