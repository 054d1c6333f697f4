"""Build the router network for Icarus or Verilator once per configuration and run traffic on it.

``RouterBuild`` is a ``tb.build.SimBuild`` (Verilog cached by the design and the ``hdl``/
``golden_model`` sources, the simulator build by everything it compiles; file locks shared by
pytest-xdist workers; cocotb's Verilator runner without ``--public-flat-rw``). With Verilator
the router module (one definition per port layout, one instance per router) is verilated and
compiled once as a hierarchical block instead of once per instance.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib

from tb.build import SimBuild, tail

__all__ = ["RouterBuild", "RouterRun", "TEST_MODULE", "TOP"]

TEST_MODULE = "tb.router.cocotb_router"
TOP = "router_network"
PARAMS_ENV = "ROUTER_TB_PARAMS"

#: Only the top's ports are visible to cocotb (see ``tb.runner._PUBLIC_VLT``).
_PUBLIC_VLT = f"""public_flat_rw -module "{TOP}" -var "clk"
public_flat_rw -module "{TOP}" -var "rst"
public_flat_rw -module "{TOP}" -var "error"
public_flat_rw -module "{TOP}" -var "inject__*"
public_flat_rw -module "{TOP}" -var "eject__*"
"""


@dataclasses.dataclass
class RouterRun:
    """Results of one simulation: per scenario dicts (see ``tb.router.cocotb_router``)."""
    ok: bool
    scenarios: list
    message: str
    wall_s: float
    log_file: pathlib.Path


class RouterBuild(SimBuild):
    """One simulator build of ``RouterNetwork(topology, **network_args)``.

    Parameters
    ----------
    topology : golden_model.topology.Topology
    sim : {"icarus", "verilator"}
    network_args : dict
        Keyword arguments of ``hdl.router.RouterNetwork``.
    cxx_opt, long_runs, build_root
        As ``tb.build.SimBuild``.
    """

    def __init__(self, topology, sim="verilator", network_args=None, *, cxx_opt=None,
                 long_runs=False, build_root=None):
        verilator = sim == "verilator"
        super().__init__(sim, kind="router", label=topology.spec.replace(":", "-"), top=TOP,
                         long_runs=long_runs, cxx_opt=cxx_opt,
                         build_args=["--hierarchical"] if verilator else (),
                         make_vars=[f"-j{os.cpu_count() or 1}"] if verilator else (),
                         public=_PUBLIC_VLT, build_root=build_root)
        self.topology = topology
        self.network_args = dict(network_args or {})

    @property
    def design_key(self):
        return {"topology": self.topology.spec, "args": self.network_args}

    def network(self):
        from hdl.router import RouterNetwork  # noqa: PLC0415
        return RouterNetwork(self.topology, **self.network_args)

    def generate(self):
        from hdl.router import to_verilog  # noqa: PLC0415
        return to_verilog(self.network(), name=TOP)

    def verilog(self):
        """The Verilog's path (generated once)."""
        return self.network_file()

    def verilator_control(self, verilog):
        from hdl.router.network import router_modules  # noqa: PLC0415
        return self.public + "".join(f'hier_block -module "{mod}"\n'
                                     for mod in router_modules(verilog, TOP))

    def run(self, scenarios, *, stall_cycles=3000, name="run"):
        """Run ``scenarios`` (``TrafficSpec``s) in one simulation; returns a ``RouterRun``."""
        self.build()
        run_dir = self.run_dir(name)
        # traffic patterns see terminals on a grid; fat-tree/BiGraph: one row of endpoints
        rows, cols = self.topology.grid or (1, self.topology.num_nodes)
        conc = self.network_args.get("concentration", 1)
        params = {
            "num_terminals": self.topology.num_nodes * conc, "rows": rows, "cols": cols,
            "concentration": conc, "flit_width": self.network_args.get("flit_width", 128),
            "stall_cycles": stall_cycles, "result_file": str(run_dir / "result.json"),
            "scenarios": [dataclasses.asdict(s) for s in scenarios],
        }
        outcome = self.test(TEST_MODULE, run_dir, params, PARAMS_ENV)
        message, wall, log = outcome.failure, outcome.wall_s, outcome.log_file
        try:
            results = json.loads((run_dir / "result.json").read_text())["scenarios"]
        except (OSError, ValueError, KeyError):
            results = []
        ok = (not message and len(results) == len(scenarios)
              and all(r["status"] == "done" for r in results))
        if not ok:
            bad = [r for r in results if r["status"] != "done"]
            detail = (f"{bad[0]['name']}: {bad[0]['status']}: {bad[0]['message']}" if bad
                      else f"log {log}:\n{tail(log)}")
            message = f"{message}; {detail}" if message else detail
        return RouterRun(ok=ok, scenarios=results, message=message, wall_s=wall, log_file=log)
