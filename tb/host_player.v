// host_player: plays one node's host commands into the network and records its responses.
//
// One instance per node, instantiated by the generated harness `tb_top` (tb/harness.py). The
// cocotb test only acts at the edges of a run (pulse `load`, wait for `loaded`, pulse the
// network's `start`, wait for `done`, pulse `readback`, wait for `read_done`, pulse `dump`, wait
// for `dumped`), so the simulator runs long all-reduces at full speed.
//
// Command image (hex, one CMD_WIDTH-bit word per line, as $readmemh reads it):
//   word 0        header: bits [31:0] = number of load commands L, bits [63:32] = number of
//                 buffer flits R to read back
//   words 1 .. L  host commands (HostCmd words), streamed into host_cmd in order on `load`
// On `readback` the player itself generates R read commands (write = 0, target = 0 buffer,
// addr = 0 .. R-1) and stores the R responses of host_rsp in order; `dump` writes them with
// $writememh, one RSP_WIDTH-bit word per line.
//
// File names: <dir>/run<k>/cmd_<NODE>.hex and <dir>/run<k>/rsp_<NODE>.hex, where <dir> is the
// plusarg +tb_dir=DIR (default: the simulator's working directory) and k is the `run` input
// (several runs can share one simulation).
//
// Back-pressure: an LFSR per player. While it has a command to offer and is not already
// offering one, the player raises valid in a cycle with probability VALID_PCT % (then holds it
// until ready, as a stream requires); it raises host_rsp ready in a cycle with probability
// READY_PCT %. Plusargs +tb_valid_pct=N, +tb_ready_pct=N and +tb_seed=N override the
// parameters at run time (one build serves every run).
//
// Plain Verilog-2005 plus $value$plusargs; no delays, so Verilator needs no --timing.
module host_player #(
    parameter integer NODE = 0,
    parameter integer CMD_WIDTH = 154,
    parameter integer RSP_WIDTH = 128,
    parameter integer IMAGE_DEPTH = 1024,
    parameter integer RSP_DEPTH = 1024,
    parameter integer ADDR_LSB = 6,
    parameter integer ADDR_WIDTH = 20,
    parameter integer SEED = 1,
    parameter integer VALID_PCT = 100,
    parameter integer READY_PCT = 100
) (
    input  wire                 clk,
    input  wire                 rst,
    input  wire [7:0]           run,
    input  wire                 load,
    input  wire                 readback,
    input  wire                 dump,
    output reg                  loaded,
    output reg                  read_done,
    output reg                  dumped,
    output reg                  cmd_valid,
    input  wire                 cmd_ready,
    output reg  [CMD_WIDTH-1:0] cmd_payload,
    input  wire                 rsp_valid,
    output reg                  rsp_ready,
    input  wire [RSP_WIDTH-1:0] rsp_payload
);
    localparam [2:0] IDLE = 3'd0, HEADER = 3'd1, LOADING = 3'd2, READING = 3'd3;

    reg [CMD_WIDTH-1:0] image [0:IMAGE_DEPTH-1];
    reg [RSP_WIDTH-1:0] rsp_mem [0:RSP_DEPTH-1];

    reg [2:0]    state;
    reg [31:0]   num_load;      // L
    reg [31:0]   num_read;      // R
    reg [31:0]   offered;       // commands presented so far (current phase)
    reg [31:0]   accepted;      // commands accepted so far (current phase)
    reg [31:0]   received;      // responses stored
    reg [31:0]   lfsr;
    reg [31:0]   valid_pct;
    reg [31:0]   ready_pct;
    reg [31:0]   seed;
    reg [8*512-1:0] dir;
    reg [8*600-1:0] fname;
    reg          have_dir;

    // xorshift32: never reaches 0 from a non-zero state.
    function [31:0] next_lfsr(input [31:0] x);
        reg [31:0] y;
        begin
            y = x ^ (x << 13);
            y = y ^ (y >> 17);
            next_lfsr = y ^ (y << 5);
        end
    endfunction

    initial begin
        valid_pct = VALID_PCT;
        ready_pct = READY_PCT;
        seed = SEED;
        have_dir = 1'b0;
        dir = 0;
        if ($value$plusargs("tb_valid_pct=%d", valid_pct)) ;
        if ($value$plusargs("tb_ready_pct=%d", ready_pct)) ;
        if ($value$plusargs("tb_seed=%d", seed)) ;
        if ($value$plusargs("tb_dir=%s", dir)) have_dir = 1'b1;
    end

    wire [31:0] mixed_seed = seed ^ (32'h9E3779B9 * (NODE + 1));
    // Decisions from two independent 16-bit fields of the LFSR state (0..65535 scaled to 0..99).
    wire        offer_now  = ((lfsr[15:0] * 32'd100) >> 16) < valid_pct;
    wire        accept_now = ((lfsr[31:16] * 32'd100) >> 16) < ready_pct;
    wire        cmd_fire   = cmd_valid & cmd_ready;
    wire        rsp_fire   = rsp_valid & rsp_ready;
    wire        slot_free  = !cmd_valid || cmd_ready;
    wire [31:0] phase_len  = (state == LOADING) ? num_load : num_read;

    always @(posedge clk) begin
        if (rst) begin
            state <= IDLE;
            loaded <= 1'b0;
            read_done <= 1'b0;
            dumped <= 1'b0;
            cmd_valid <= 1'b0;
            cmd_payload <= {CMD_WIDTH{1'b0}};
            rsp_ready <= 1'b0;
            num_load <= 32'd0;
            num_read <= 32'd0;
            offered <= 32'd0;
            accepted <= 32'd0;
            received <= 32'd0;
            lfsr <= (mixed_seed == 32'd0) ? 32'h1 : mixed_seed;
        end else begin
            lfsr <= next_lfsr(lfsr);
            rsp_ready <= (state == READING) && accept_now;
            if (rsp_fire) begin
                if (received < RSP_DEPTH) rsp_mem[received] <= rsp_payload;
                received <= received + 32'd1;
            end
            if (cmd_fire) accepted <= accepted + 32'd1;
            case (state)
                IDLE: begin
                    if (load) begin
                        if (have_dir) $sformat(fname, "%0s/run%0d/cmd_%0d.hex", dir, run, NODE);
                        else $sformat(fname, "run%0d/cmd_%0d.hex", run, NODE);
                        $readmemh(fname, image);
                        loaded <= 1'b0;
                        read_done <= 1'b0;
                        dumped <= 1'b0;
                        state <= HEADER;
                    end else if (readback) begin
                        offered <= 32'd0;
                        accepted <= 32'd0;
                        received <= 32'd0;
                        read_done <= (num_read == 32'd0);
                        dumped <= 1'b0;
                        state <= (num_read == 32'd0) ? IDLE : READING;
                    end else if (dump) begin
                        if (have_dir) $sformat(fname, "%0s/run%0d/rsp_%0d.hex", dir, run, NODE);
                        else $sformat(fname, "run%0d/rsp_%0d.hex", run, NODE);
                        if (num_read != 32'd0) $writememh(fname, rsp_mem, 0, num_read - 1);
                        dumped <= 1'b1;
                    end
                end
                HEADER: begin
                    num_load <= image[0][31:0];
                    num_read <= image[0][63:32];
                    offered <= 32'd0;
                    accepted <= 32'd0;
                    if (image[0][31:0] == 32'd0) begin
                        loaded <= 1'b1;
                        state <= IDLE;
                    end else begin
                        state <= LOADING;
                    end
                end
                LOADING, READING: begin
                    if (slot_free) begin
                        if (offered < phase_len && offer_now) begin
                            cmd_valid <= 1'b1;
                            if (state == LOADING) begin
                                cmd_payload <= image[offered + 32'd1];
                            end else begin
                                cmd_payload <= {CMD_WIDTH{1'b0}};
                                cmd_payload[ADDR_LSB +: ADDR_WIDTH] <= offered[ADDR_WIDTH-1:0];
                            end
                            offered <= offered + 32'd1;
                        end else begin
                            cmd_valid <= 1'b0;
                        end
                    end
                    if (state == LOADING && accepted + cmd_fire == num_load) begin
                        loaded <= 1'b1;
                        state <= IDLE;
                    end
                    if (state == READING && received + rsp_fire == num_read) begin
                        read_done <= 1'b1;
                        state <= IDLE;
                    end
                end
                default: state <= IDLE;
            endcase
        end
    end
endmodule
