"""What ``generate`` writes beside the Verilog so the network drops into other projects: a port
description from Amaranth's own component metadata, a file list, and a FuseSoC core file
(CAPI2, the format FuseSoC's ``Core2Parser`` reads)."""

import json

from golden_model.provenance import stamp, tool_version
from tb.toolchain import AMARANTH_LINT_WAIVERS

__all__ = ["port_description", "file_list", "fusesoc_core", "PORT_MEANINGS"]

#: What each top-level port group means (docs/hardware.md, "Control/status", "Host port").
PORT_MEANINGS = {
    "clk": "clock of the whole network (one domain, rising edge)",
    "rst": "synchronous reset, active high",
    "start": "pulse: every NI starts its schedule",
    "node_start": "per node, a pulse that starts that node's NI alone",
    "done": "every NI has finished its schedule (0 from the cycle after start until then)",
    "error": "sticky until the next start: a received head did not match its table row, or "
             "a flit arrived at a full receive FIFO",
    "cycles": "start pulse in cycle s, first cycle with done = 1 in cycle d: d - s",
    "step": "the smallest step among the unfinished engines' current rows",
    "node_done": "per node, its NI has finished its schedule",
    "node_error": "per node, its NI's error (as error)",
    "node_step": "per node, its NI's step (as step)",
    "host_cmd": "per node, a stream of host commands (write or read a buffer or table word)",
    "host_rsp": "per node, a stream of the words host reads return",
}


def port_description(network, top):
    """The ports of ``network`` (an Amaranth ``wiring.Component``) as the component metadata
    says them (``metadata.as_json()``: names, directions, widths), with the clock and reset of
    its one domain and what each port group means (``PORT_MEANINGS``), as a JSON-ready dict."""
    members = network.metadata.as_json()["interface"]["members"]
    return stamp({"top": top, "clock": "clk", "reset": "rst",
                  "meanings": {k: v for k, v in PORT_MEANINGS.items()
                               if k in members or k in ("clk", "rst")},
                  "interface": network.metadata.as_json()["interface"]})


def file_list(files):
    """A file list (``-f`` file of Verilator, Icarus and most flows): one path per line."""
    return "".join(f"{f}\n" for f in files)


def fusesoc_core(top, files, description):
    """A FuseSoC CAPI2 core file for the generated ``files`` with toplevel ``top``: a
    ``default`` target and a ``lint`` target running Verilator's ``--lint-only -Wall`` with the
    waivers every Amaranth design needs (``tb.toolchain.AMARANTH_LINT_WAIVERS``)."""
    version = tool_version()
    version = version if version[:1].isdigit() else "0"
    waivers = ", ".join(f"-Wno-{w}" for w in AMARANTH_LINT_WAIVERS)
    names = "\n".join(f"      - {f}" for f in files)
    return f"""CAPI=2:
name: allreduce-rtl:generated:{top}:{version}
description: {json.dumps(description)}

filesets:
  rtl:
    files:
{names}
    file_type: verilogSource

targets:
  default:
    filesets: [rtl]
    toplevel: {top}
  lint:
    default_tool: verilator
    filesets: [rtl]
    toplevel: {top}
    tools:
      verilator:
        mode: lint-only
        verilator_options: [-Wall, {waivers}]
"""
