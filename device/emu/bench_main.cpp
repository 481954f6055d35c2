// qt_emu_bench: how fast the emulator runs kernels, so test sizes can be planned. Prints, per kernel,
// emulated kernel-threads per second, fiber switches per second and the per-operation cost.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/flag_ranges.h"
#include "common/paths.h"
#include "device/emu/emu_device.h"
#include "device/emu/fiber.h"

namespace {

using qt::dev::Buffer;
using qt::dev::KernelArgs;

struct Measurement {
  double seconds;  // process CPU time: the machine may be shared, wall time would mostly measure the others
  double wall;
  uint64_t switches, threads;
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <class F>
Measurement measure(qt::emu::EmuDevice& dev, F&& launch) {
  launch();  // warm-up: stacks and shared windows touched once
  const auto s0 = dev.stats();
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  launch();
  const double sec = cpu_seconds() - c0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto s1 = dev.stats();
  return {sec, wall, s1.fiber_switches - s0.fiber_switches, s1.threads_run - s0.threads_run};
}

void row(const char* name, const char* unit, double ops, const Measurement& m) {
  std::printf("| %-40s | %9.1f | %9.1f | %10.3g | %10.3g | %7.1f %s |\n", name, m.seconds * 1e3, m.wall * 1e3,
              m.threads / m.seconds, m.switches / m.seconds, m.seconds * 1e9 / ops, unit);
}

// Raw cost of the context switch alone: a fiber and the main context bounce control back and forth.
struct PingPong {
  qt::emu::Context main, fiber;
};
void ping_pong_entry(void* arg) {
  auto* p = static_cast<PingPong*>(arg);
  for (;;) qt::emu::switch_context(&p->fiber, p->main);
}
double raw_switch_ns() {
  qt::emu::StackPool pool(1);
  PingPong p;
  qt::emu::make_context(&p.fiber, pool.stack_lo(0), pool.stack_hi(0), &ping_pong_entry, &p);
  const int rounds = 2000000;
  const double c0 = cpu_seconds();
  for (int i = 0; i < rounds; ++i) qt::emu::switch_context(&p.main, p.fiber);
  return (cpu_seconds() - c0) * 1e9 / (2.0 * rounds);
}

}  // namespace

int main(int argc, char** argv) {
  return qt::run_tool("qt_emu_bench", [&] {
    qt::CliArgs cli("qt_emu_bench", "Measure CUDA-emulator speed (kernel threads/s, fiber switches/s, op costs).");
    cli.option("--threads", "N", "host threads running blocks (default: all cores)").range(qt::flag_ranges::kThreads);
    cli.option("--checks", "on|off", "race/bounds/alignment checks (instrumented modules)", "on");
    cli.option("--opt", "LEVEL", "host compiler optimisation for kernel modules", "-O1");
    cli.option("--cache", "DIR", "JIT cache directory (default: the user cache)");
    if (!cli.parse(argc, argv)) return 0;
    const std::string checks = cli.get("--checks");
    if (checks != "on" && checks != "off") throw qt::Error("--checks must be on or off, not '" + checks + "'");
    qt::emu::EmuOptions o;
    if (cli.given("--threads")) o.threads = cli.get_int_as<uint32_t>("--threads");
    o.checks = checks == "on";
    o.opt_level = cli.get("--opt");
    if (auto c = cli.get_optional("--cache")) o.cache_dir = *c;
    qt::emu::EmuDevice dev(o);

    qt::dev::ModuleSource src;
    src.name = "bench_kernels.cu";
    src.source = qt::emu::read_text_file(qt::source_root() + "/device/emu/bench/bench_kernels.cu");
    src.kernels = {"bench_barrier", "bench_shfl", "bench_alu", "bench_memory", "bench_mma"};
    auto mod = dev.load_module(src);
    std::printf("device: %s\nmodule compile: %.2f s (%s)\n\n", dev.name().c_str(), dev.last_jit().seconds,
                dev.last_jit().cache_hit ? "cache hit" : "compiled");
    const double sw = raw_switch_ns();
    std::printf("raw fiber context switch: %.1f ns (%.3g switches/s)\n", sw, 1e9 / sw);
    std::printf("Rates use process CPU time (all host threads), so they hold on a busy machine.\n\n");
    std::printf("| %-40s | %9s | %9s | %10s | %10s | %s |\n", "kernel (grid x block, per-thread work)", "cpu ms",
                "wall ms", "threads/s", "switches/s", "CPU cost per op");
    std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(42, '-').c_str(), std::string(11, '-').c_str(),
                std::string(11, '-').c_str(), std::string(12, '-').c_str(), std::string(12, '-').c_str(),
                std::string(26, '-').c_str());

    const uint32_t blocks = 8, threads = 256;
    Buffer out(dev, 256 * 256 * 4), x(dev, 4096 * 4);
    dev.memset(x.ptr(), 0, 4096 * 4);
    // Each row: the kernel's second launch (measure() warms up with the first), cost per `ops` operations.
    auto bench = [&](const char* kernel, uint32_t grid, uint32_t block, const KernelArgs& args, const char* label,
                     const char* unit, double ops) {
      row(label, unit, ops, measure(dev, [&] { dev.launch(mod->kernel(kernel), {{grid}, {block}, 0}, args); }));
    };
    const double bt = 1.0 * blocks * threads;
    bench("bench_barrier", blocks, threads, KernelArgs().add(200).add(out.ptr()), "bench_barrier 8x256, 400 barriers",
          "ns/thread-barrier", 2.0 * 200 * bt);
    bench("bench_shfl", blocks, threads, KernelArgs().add(400).add(out.ptr()), "bench_shfl 8x256, 400 shuffles",
          "ns/thread-shfl", 400 * bt);
    bench("bench_alu", blocks, threads, KernelArgs().add(100000).add(out.ptr()), "bench_alu 8x256, 1e5 fma",
          "ns/thread-fma", 100000 * bt);
    bench("bench_alu", 256, 256, KernelArgs().add(1).add(out.ptr()), "bench_alu 256x256, 1 fma (launch)", "ns/thread",
          256.0 * 256);
    bench("bench_memory", blocks, threads, KernelArgs().add(x.ptr()).add(4096).add(2000).add(out.ptr()),
          "bench_memory 8x256, 2000x(ld+st+ld)", "ns/thread-access", 3.0 * 2000 * bt);
    bench("bench_mma", blocks, 32, KernelArgs().add(2000).add(out.ptr()), "bench_mma 8x32, 2000x(ldm.x4+2ldm+2mma)",
          "ns/warp-mma", 2.0 * 2000 * blocks);
    return 0;
  });
}
