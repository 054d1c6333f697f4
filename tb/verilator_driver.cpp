// verilator_driver.cpp: drives tb_top (tb/harness.py) through the runs of a parameter file in a
// Verilator model, without cocotb. Long runs only (the demo): cocotb's clock toggles the clock
// through VPI at every edge, which doubles the time of a long run (torus:4x4, 150-cycle links:
// about 24,000 against 48,000 cycles per second). It does what tb/cocotb_allreduce.py does, in
// the same order and with the same cycle accounting; tests/test_backdoor.py runs both on one
// design and compares them.
//
// Command line: +tb_params=FILE +tb_result=FILE [+tb_progress=FILE] and the host players'
// plusargs (tb/host_player.v). The parameter file (written by tb/runner.py):
//   line 1:     <progress_slice> <start_delay> <dump_timeout>
//   then, per run: <index> <load_timeout> <timeout> <read_timeout> <name (rest of the line)>
// The result file, rewritten after every run, one line per run (read by tb/runner.py):
//   <name>\t<status>\t<phase>\t<load_cycles>\t<cycles>\t<tb_cycles>\t<read_cycles>\t<wall_s>
//   \t<end_cycle>\t<node_done hex>\t<node_error hex>\t<node_step hex>
// status: done, stall (a phase timed out) or error (the network raised error); phase: where a
// run stopped. The runner turns node_* into the stall or error message.
//
// The buffer backdoor's DPI form (tb.harness.Backdoor.dpi_verilog; with +tb_backdoor_map=FILE):
// every buffer bank polls allreduce_bd_serial() at each rising edge and, when it changed, loads
// or dumps its file, named by allreduce_bd_file(its %m). The driver raises the serial for the
// edge where it pulses tb_load (load) or tb_dump (dump), the edges where tb_top's own backdoor
// acts. The map file (Backdoor.write_map) has one line per bank, "<load file> <dump file>
// <name>", the name relative to the network (ni3.buffer.bank5.ram); a bank's %m holds the
// name's components in order (a hierarchical build inserts its own) and ends with its last one.
// The bank then hands its whole word array to allreduce_bd_copy(), which reads or writes the
// file in the formats of $fread (each word most significant byte first) and of $fwrite("%u")
// (32-bit units, least significant first, each little-endian), five times faster than those
// system tasks in Verilator (150 MB per torus:4x4 demo run).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "Vtb_top.h"
#include "svdpi.h"
#include "verilated.h"

namespace {

struct Run {
    int index;
    uint64_t load_timeout, timeout, read_timeout;
    std::string name;
    std::string status = "running", phase = "init";
    uint64_t load_cycles = 0, cycles = 0, tb_cycles = 0, read_cycles = 0, end_cycle = 0;
    double wall_s = 0;
    std::string done_hex, error_hex, step_hex;
};

std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
    return b;
}

template <std::size_t N>
std::string hex(const VlWide<N>& w) {
    std::string s;
    char b[12];
    for (std::size_t i = N; i-- > 0;) {
        std::snprintf(b, sizeof b, "%08x", w[i]);
        s += b;
    }
    return s;
}

double now() {
    return std::chrono::duration<double>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Driver {
  public:
    Driver(VerilatedContext* ctx, Vtb_top* top, std::string progress, uint64_t slice)
        : ctx_(ctx), top_(top), progress_(std::move(progress)), slice_(slice ? slice : 1) {}

    uint64_t cycle() const { return cycle_; }

    // One clock cycle: inputs set before it are sampled at its rising edge.
    void tick() {
        top_->clk = 1;
        top_->eval();
        ctx_->timeInc(1);
        top_->clk = 0;
        top_->eval();
        ctx_->timeInc(1);
        if (++cycle_ % slice_ == 0) report();
    }

    void pulse(CData& sig) {
        sig = 1;
        tick();
        sig = 0;
    }

    // Cycles until sig is 1 (checked after each cycle, as cocotb checks); -1 on timeout, -2 if
    // watch_error and error rose.
    int64_t wait_high(const CData& sig, uint64_t max_cycles, bool watch_error) {
        uint64_t t0 = cycle_;
        while (true) {
            if (watch_error && top_->error) return -2;
            if (sig) return static_cast<int64_t>(cycle_ - t0);
            if (cycle_ - t0 >= max_cycles) return -1;
            tick();
        }
    }

    void set(const std::string& run, const std::string& phase) {
        run_ = run;
        phase_ = phase;
        report();
    }

  private:
    void report() {
        if (progress_.empty()) return;
        std::string tmp = progress_ + ".tmp";
        if (FILE* f = std::fopen(tmp.c_str(), "w")) {
            std::fprintf(f, "{\"run\": \"%s\", \"phase\": \"%s\", \"cycle\": %llu}\n",
                         run_.c_str(), phase_.c_str(), static_cast<unsigned long long>(cycle_));
            std::fclose(f);
            std::rename(tmp.c_str(), progress_.c_str());
        }
    }

    VerilatedContext* ctx_;
    Vtb_top* top_;
    std::string progress_, run_, phase_;
    uint64_t slice_, cycle_ = 0;
};

// The result file with the first `count` runs (those started).
void save(const std::string& path, const std::vector<Run>& runs, std::size_t count) {
    std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return;
    for (std::size_t i = 0; i < count; ++i) {
        const Run& r = runs[i];
        std::fprintf(f, "%s\t%s\t%s\t%llu\t%llu\t%llu\t%llu\t%.3f\t%llu\t%s\t%s\t%s\n",
                     r.name.c_str(), r.status.c_str(), r.phase.c_str(),
                     static_cast<unsigned long long>(r.load_cycles),
                     static_cast<unsigned long long>(r.cycles),
                     static_cast<unsigned long long>(r.tb_cycles),
                     static_cast<unsigned long long>(r.read_cycles), r.wall_s,
                     static_cast<unsigned long long>(r.end_cycle), r.done_hex.c_str(),
                     r.error_hex.c_str(), r.step_hex.c_str());
    }
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, sep)) out.push_back(item);
    return out;
}

// The DPI backdoor's state (see the header).
struct BackdoorState {
    int serial = 0;
    int kind = 0;                   // 0: load, 1: dump (the index into Bank::files)
    std::string folder;             // <tb_dir>/run<k>
    struct Bank {
        std::vector<std::string> name;      // components
        std::string files[2];               // load, dump
    };
    std::vector<Bank> banks;
    std::unordered_map<std::string, const Bank*> by_scope;     // cache; nullptr: not a bank
    std::string path;               // the last answer (DPI strings must outlive the call)

    bool load_map(const std::string& file) {
        FILE* f = std::fopen(file.c_str(), "r");
        if (!f) return false;
        char load[256], dump[256], name[512];
        while (std::fscanf(f, "%255s %255s %511s", load, dump, name) == 3)
            banks.push_back(Bank{split(name, '.'), {load, dump}});
        std::fclose(f);
        return !banks.empty();
    }

    const Bank* find(const std::string& scope) {
        auto hit = by_scope.find(scope);
        if (hit != by_scope.end()) return hit->second;
        std::vector<std::string> parts = split(scope, '.');
        const Bank* found = nullptr;
        for (const Bank& bank : banks) {
            const auto& name = bank.name;
            if (parts.empty() || name.empty() || parts.back() != name.back()) continue;
            std::size_t k = 0;
            for (const auto& part : parts)
                if (k < name.size() && part == name[k]) ++k;
            if (k == name.size()) {
                found = &bank;
                break;
            }
        }
        return by_scope.emplace(scope, found).first->second;
    }
};

BackdoorState backdoor;

std::string plusarg(VerilatedContext* ctx, const char* name) {
    std::string match = ctx->commandArgsPlusMatch(name);     // "+name=value" or ""
    std::string prefix = std::string("+") + name;
    return match.size() > prefix.size() ? match.substr(prefix.size()) : "";
}

}  // namespace

extern "C" int allreduce_bd_serial() { return backdoor.serial; }
extern "C" int allreduce_bd_kind() { return backdoor.kind; }
extern "C" const char* allreduce_bd_file(const char* scope) {
    const BackdoorState::Bank* bank = backdoor.find(scope);
    backdoor.path = bank ? backdoor.folder + "/" + bank->files[backdoor.kind] : "";
    return backdoor.path.c_str();
}

// Load (kind 0) or dump (kind 1) the array `mem` of `width`-bit words (a multiple of 32) from or
// to `path`; a load shorter than the array leaves the words after it as they are, as $fread does.
extern "C" void allreduce_bd_copy(int kind, const char* path, int width,
                                  const svOpenArrayHandle mem) {
    const int lo = svLow(mem, 1), n = svSize(mem, 1), units = width / 32, bytes = width / 8;
    std::vector<unsigned char> buf(static_cast<std::size_t>(n) * bytes);
    std::vector<svBitVecVal> word(units);
    FILE* f = std::fopen(path, kind == 0 ? "rb" : "wb");
    if (!f) return;
    if (kind == 0) {
        std::size_t got = std::fread(buf.data(), 1, buf.size(), f) / bytes;
        for (std::size_t i = 0; i < got; ++i) {
            const unsigned char* src = &buf[i * bytes];
            for (int u = 0; u < units; ++u) {
                const unsigned char* b = src + bytes - 4 * (u + 1);
                word[u] = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) |
                          (uint32_t(b[2]) << 8) | uint32_t(b[3]);
            }
            svPutBitArrElem1VecVal(mem, word.data(), lo + static_cast<int>(i));
        }
    } else {
        for (int i = 0; i < n; ++i) {
            svGetBitArrElem1VecVal(word.data(), mem, lo + i);
            unsigned char* dst = &buf[static_cast<std::size_t>(i) * bytes];
            for (int u = 0; u < units; ++u)
                for (int k = 0; k < 4; ++k) dst[4 * u + k] = (word[u] >> (8 * k)) & 0xFF;
        }
        std::fwrite(buf.data(), 1, buf.size(), f);
    }
    std::fclose(f);
}

int main(int argc, char** argv) {
    auto ctx = std::make_unique<VerilatedContext>();
    ctx->commandArgs(argc, argv);
    std::string params = plusarg(ctx.get(), "tb_params=");
    std::string result = plusarg(ctx.get(), "tb_result=");
    FILE* pf = params.empty() ? nullptr : std::fopen(params.c_str(), "r");
    if (!pf || result.empty()) {
        std::fprintf(stderr, "verilator_driver: needs +tb_params=FILE (readable) and "
                             "+tb_result=FILE\n");
        return 2;
    }
    unsigned long long slice = 0, start_delay = 0, dump_timeout = 0;
    if (std::fscanf(pf, "%llu %llu %llu", &slice, &start_delay, &dump_timeout) != 3) {
        std::fprintf(stderr, "verilator_driver: %s: bad first line\n", params.c_str());
        return 2;
    }
    std::vector<Run> runs;
    char name[512];
    unsigned long long lt, t, rt;
    int index;
    while (std::fscanf(pf, "%d %llu %llu %llu %511[^\n]", &index, &lt, &t, &rt, name) == 5)
        runs.push_back(Run{index, lt, t, rt, name});
    std::fclose(pf);
    std::string bd_map = plusarg(ctx.get(), "tb_backdoor_map=");
    bool dpi_backdoor = !bd_map.empty();
    if (dpi_backdoor && !backdoor.load_map(bd_map)) {
        std::fprintf(stderr, "verilator_driver: %s: no backdoor map\n", bd_map.c_str());
        return 2;
    }
    std::string tb_dir = plusarg(ctx.get(), "tb_dir=");
    // A backdoor request for the next rising edge (the DPI form; see the header).
    auto request = [&](int kind, const Run& r) {
        if (!dpi_backdoor) return;
        backdoor.kind = kind;
        backdoor.folder = (tb_dir.empty() ? "" : tb_dir + "/") + "run" + std::to_string(r.index);
        ++backdoor.serial;
    };

    auto top = std::make_unique<Vtb_top>(ctx.get());
    Driver d(ctx.get(), top.get(), plusarg(ctx.get(), "tb_progress="), slice);
    top->start = top->tb_load = top->tb_readback = top->tb_dump = 0;
    top->tb_run = 0;
    top->rst = 1;
    for (int i = 0; i < 5; ++i) d.tick();
    top->rst = 0;
    for (int i = 0; i < 2; ++i) d.tick();
    save(result, runs, 0);
    int rc = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        Run& r = runs[i];
        double wall = now();
        save(result, runs, i + 1);      // started: a crash from here on leaves "running"
        if (i) {        // a reset between runs, as cocotb's TB.reset
            top->rst = 1;
            for (int k = 0; k < 3; ++k) d.tick();
            top->rst = 0;
            for (int k = 0; k < 2; ++k) d.tick();
        }
        int64_t got;
        r.phase = "load";
        d.set(r.name, r.phase);
        top->tb_run = static_cast<CData>(r.index);
        request(0, r);
        d.pulse(top->tb_load);
        got = d.wait_high(top->tb_loaded, r.load_timeout, false);
        if (got >= 0) {
            r.load_cycles = got;
            r.phase = "run";
            d.set(r.name, r.phase);
            d.pulse(top->start);
            // Cycle k ends with d.cycle() == k + 1: start was sampled in cycle d.cycle() - 1,
            // and done, raised in cycle e, is seen when d.cycle() == e + 1.
            uint64_t t0 = d.cycle() + start_delay;
            while (d.cycle() < t0) d.tick();    // done is the last run's until start arrives
            got = d.wait_high(top->done, r.timeout, true);
            if (got >= 0) {
                r.tb_cycles = d.cycle() - t0;
                r.cycles = top->cycles;
                if (top->error) got = -2;
            }
        }
        if (got >= 0) {
            r.phase = "readback";
            d.set(r.name, r.phase);
            d.pulse(top->tb_readback);
            got = d.wait_high(top->tb_read_done, r.read_timeout, false);
            if (got >= 0) {
                r.read_cycles = got;
                r.phase = "dump";
                request(1, r);
                d.pulse(top->tb_dump);
                got = d.wait_high(top->tb_dumped, dump_timeout, false);
            }
        }
        r.status = got >= 0 ? "done" : got == -2 ? "error" : "stall";
        r.done_hex = hex(top->node_done);
        r.error_hex = hex(top->node_error);
        r.step_hex = hex(top->node_step);
        r.wall_s = now() - wall;
        r.end_cycle = d.cycle();
        save(result, runs, i + 1);
        if (got < 0) {
            rc = 1;
            break;
        }
    }
    top->final();
    return rc;
}
