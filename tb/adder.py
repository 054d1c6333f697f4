"""Run the hardware adder of an element type (``hdl.adders.AdderUnit``) on a file of operand pairs
in Icarus or Verilator: one pair per cycle, read and written by the Verilog harness
(``$fscanf`` / ``$fwrite``), so a million pairs cost no Python call per cycle.

``AdderBuild(element_type, sim).run(a, b)`` returns the sums' bit patterns (numpy, the type's
unsigned dtype), in operand order.
"""

from __future__ import annotations

import numpy as np

from .build import BuildError, SimBuild, tail

__all__ = ["AdderBuild", "TOP", "UNIT"]

TOP = "adder_tb"
UNIT = "adder_unit"
TEST_MODULE = "tb.cocotb_adder"
PARAMS_ENV = "ADDER_TB_PARAMS"

_HARNESS = """`timescale 1ns/1ps
// Operand pairs from +vectors (one "aaaa bbbb" hex line each), a pair per cycle; the sums to
// +results, one hex line each, in order; done rises after the last one.
module adder_tb(input clk, output reg done);
  localparam W = {bits}, L = {latency};
  reg [W-1:0] a = 0, b = 0, next_a, next_b;
  wire [W-1:0] s;
  reg [L:0] pipe = 0;     // pipe[j]: the operands of j cycles ago were valid
  reg feeding = 1;
  integer fin, fout, got;
  reg [8*256-1:0] vectors, results;
  {unit} dut(.clk(clk), .rst(1'b0), .a(a), .b(b), .sum(s));
  initial begin
    done = 0;
    if (!$value$plusargs("vectors=%s", vectors) || !$value$plusargs("results=%s", results)) begin
      $display("adder_tb: +vectors=FILE and +results=FILE are needed");
      $finish;
    end
    fin = $fopen(vectors, "r");
    fout = $fopen(results, "w");
    if (fin == 0 || fout == 0) begin
      $display("adder_tb: cannot open %0s or %0s", vectors, results);
      $finish;
    end
  end
  always @(posedge clk) begin
    if (pipe[L]) $fwrite(fout, "%h\\n", s);
    if (feeding) begin
      got = $fscanf(fin, "%h %h\\n", next_a, next_b);
      if (got == 2) begin
        a <= next_a;
        b <= next_b;
      end else feeding <= 0;
    end
    pipe <= {{pipe[L-1:0], feeding && got == 2}};
    if (!feeding && pipe == 0 && !done) begin
      $fclose(fout);
      done <= 1;
    end
  end
endmodule
"""


class AdderBuild(SimBuild):
    """One simulator build of the adder of ``element_type`` (latency at least 1).

    Parameters
    ----------
    element_type : golden_model.elements.ElementType
    sim : {"icarus", "verilator"}
    build_root : path, optional
    """

    def __init__(self, element_type, sim="verilator", *, build_root=None):
        from hdl.adders import hardware_adder  # noqa: PLC0415
        super().__init__(sim, kind="adder", label=element_type.name, top=TOP,
                         design_file=f"{UNIT}.v", cxx_opt="-O1", build_root=build_root)
        self.element_type = element_type
        self.latency = hardware_adder(element_type).latency
        if self.latency < 1:
            raise ValueError(f"the adder harness needs a latency of 1 or more, not {self.latency}")

    @property
    def design_key(self):
        return {"type": self.element_type.name}

    def generate(self):
        from amaranth.back import verilog  # noqa: PLC0415

        from hdl.adders import AdderUnit  # noqa: PLC0415
        return verilog.convert(AdderUnit(self.element_type), name=UNIT)

    def harness_files(self, verilog):
        return {f"{TOP}.v": _HARNESS.format(bits=self.element_type.bits, latency=self.latency,
                                            unit=UNIT)}

    def run(self, a, b, *, name="run"):
        """Sums of the bit patterns ``a[i] + b[i]`` (1-D arrays of equal length).

        Raises
        ------
        BuildError
            If the build or the simulation fails, or the simulator wrote a different number of
            sums (the message names the log).
        """
        t = self.element_type
        a = np.asarray(a, dtype=t.unsigned)
        b = np.asarray(b, dtype=t.unsigned)
        run_dir = self.run_dir(name)
        digits = t.bits // 4
        vectors, results = run_dir / "vectors.hex", run_dir / "results.hex"   # the run's cwd
        lines = np.char.add(np.char.add(np.char.zfill(np.char.mod("%x", a), digits), " "),
                            np.char.zfill(np.char.mod("%x", b), digits))
        vectors.write_text("\n".join(lines.tolist()) + "\n")
        outcome = self.test(TEST_MODULE, run_dir, {"cycles": len(a) + 4 * self.latency + 16},
                            PARAMS_ENV, plusargs=[f"+vectors={vectors.name}", f"+results={results.name}"])
        if outcome.failure:
            raise BuildError(f"adder simulation failed: {outcome.failure}; log "
                             f"{outcome.log_file}:\n{tail(outcome.log_file)}")
        got = [int(x, 16) for x in results.read_text().split()] if results.is_file() else []
        if len(got) != len(a):
            raise BuildError(f"the adder simulation wrote {len(got)} sums for {len(a)} operand "
                             f"pairs; log {outcome.log_file}")
        return np.array(got, dtype=np.uint64).astype(t.unsigned)
