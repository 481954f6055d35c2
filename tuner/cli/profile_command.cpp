// qtune profile: a point of a GPU kernel family run once on the emulator with its memory profile on (bank
// conflicts, sectors per request, bytes, cp.async in flight; device/emu/profile.h), plus the SASS
// instruction mix of each kernel's main loop when nvdisasm is installed.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/flag_ranges.h"
#include "device/emu/emu_device.h"
#include "device/arch/arch_limits.h"
#include "device/jit/compile_service.h"
#include "device/jit/sass_mix.h"
#include "device/plan/run_plan.h"
#include "kernels_src/registry/registry.h"
#include "tuner/cli/commands.h"

namespace qt::tune {
namespace {

double ratio(uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; }

nlohmann::json counters_json(const emu::MemCounters& c, bool shared) {
  nlohmann::json j = {{"requests", c.requests}, {"lane_accesses", c.lane_accesses}, {"bytes", c.bytes}};
  if (shared) {
    j["wavefronts"] = c.wavefronts;
    j["ideal_wavefronts"] = c.ideal_wavefronts;
    j["extra_wavefronts"] = c.wavefronts - c.ideal_wavefronts;
    j["max_ways"] = c.max_ways;
  } else {
    j["sectors"] = c.sectors;
    j["ideal_sectors"] = c.ideal_sectors;
    j["sectors_per_request"] = ratio(c.sectors, c.requests);
    j["efficiency"] = ratio(c.ideal_sectors, c.sectors);
  }
  return j;
}

void print_shared(const char* what, const emu::MemCounters& c) {
  if (!c.requests) return;
  std::printf("    %-14s %8llu requests %10llu bytes  wavefronts %llu (ideal %llu, extra %llu, %.2f per request)  worst %u-way\n",
              what, (unsigned long long)c.requests, (unsigned long long)c.bytes, (unsigned long long)c.wavefronts,
              (unsigned long long)c.ideal_wavefronts, (unsigned long long)(c.wavefronts - c.ideal_wavefronts),
              ratio(c.wavefronts, c.requests), c.max_ways);
}

void print_global(const char* what, const emu::MemCounters& c) {
  if (!c.requests) return;
  std::printf("    %-14s %8llu requests %10llu bytes  sectors %llu (%.2f per request, ideal %llu: %.0f%% efficient)\n",
              what, (unsigned long long)c.requests, (unsigned long long)c.bytes, (unsigned long long)c.sectors,
              ratio(c.sectors, c.requests), (unsigned long long)c.ideal_sectors, 100.0 * ratio(c.ideal_sectors, c.sectors));
}

}  // namespace

int profile_command(const std::vector<std::string>& args) {
  CliArgs cli("qtune profile",
              "Run one point of a GPU kernel family on the CPU emulator and print what each kernel asks of the "
              "memory system: shared-memory bank conflicts, global sectors per request and their efficiency, "
              "bytes loaded and stored, cp.async data in flight at each wait; with nvdisasm, the SASS "
              "instruction mix of each kernel's main loop.");
  cli.option("--device", "D", "emu (the only device that can observe every lane's accesses)", "emu")
      .option("--family", "F", "GPU kernel family (awq_gemv, awq_gemm, awq_dequant, ...)")
      .option("--point", "P", "'p=v,...' (unspecified parameters take their defaults; default: the family's first default point)")
      .option("--shape", "S", "comma-separated values of the family's dimensions (default: its probe shape)")
      .option("--gpu", "ARCH", "architecture for the SASS mix", "sm80")
      .option("--seed", "N", "input and scheduling seed", "1").range(flag_ranges::kSeed)
      .option("--json", "FILE", "also write the profile as JSON");
  if (!cli.parse(args)) return kExitOk;
  if (auto path = cli.get_optional("--json")) {
    if (const std::string why = output_file_problem(*path); !why.empty()) throw Error("--json " + *path + ": " + why);
  }
  if (cli.get("--device") != "emu") throw Error("qtune profile: --device must be emu (got '" + cli.get("--device") + "')");
  if (!cli.given("--family")) throw Error("qtune profile needs --family (a GPU kernel family, e.g. awq_gemv)");
  const kernels::KernelFamily& f = kernels::find_family(cli.get("--family"));
  if (f.on_host()) throw Error("kernel family " + f.name + " runs on the host; qtune profile profiles GPU families");
  const kernels::Point point = cli.given("--point") ? kernels::parse_point(f, cli.get("--point")) : f.default_points().front();
  const kernels::Shape shape = cli.given("--shape") ? f.shape(parse_int_list(cli.get("--shape"), "--shape"), "--shape")
                                                    : f.probe_shape;
  if (const std::string why = f.shape_constraint(point, shape); !why.empty()) {
    throw Error("point " + kernels::point_key(point) + " cannot run " + kernels::shape_key(shape) + ": " + why);
  }
  const uint64_t seed = cli.get_int_as<uint64_t>("--seed");

  emu::EmuOptions o;
  o.profile = true;
  o.seed = seed;
  emu::EmuDevice dev(o);
  const plan::VerifyResult vr = plan::verify_point(&dev, f, point, shape, seed);
  const std::vector<emu::KernelProfile> profiles = dev.profiles();

  // SASS mix per kernel, when nvdisasm is available.
  std::map<std::string, compile::SassMix> mix;
  const std::optional<std::string> nvdisasm = compile::find_nvdisasm();
  std::string sass_note;
  if (!nvdisasm) {
    sass_note = "nvdisasm not found (PATH, /usr/local/cuda/bin, $QTUNE_NVDISASM or pip nvidia-cuda-nvdisasm): SASS instruction mix skipped";
  } else {
    compile::CompileService service;
    const int sm = compile::parse_arch(cli.get("--gpu"));
    const auto results = service.compile(f, {point}, sm);
    if (results.empty() || !results.front().ok() || !results.front().cubin) {
      sass_note = "NVRTC compile failed: SASS instruction mix skipped";
    } else {
      const auto mixes = compile::sass_mix(*nvdisasm, *results.front().cubin);
      for (const auto& k : results.front().kernels)
        for (const auto& m : mixes)
          if (m.function == k.lowered_name) mix[k.name_expression] = m;
      sass_note = "SASS of the NVRTC CUBIN for " + cli.get("--gpu") + " via " + *nvdisasm;
    }
  }

  std::printf("qtune profile: %s %s on %s (emulator, seed %llu): %s\n", f.name.c_str(), kernels::point_key(point).c_str(),
              kernels::shape_key(shape).c_str(), (unsigned long long)seed,
              vr.passed ? "verified against the CPU reference" : ("VERIFICATION FAILED: " + vr.message).c_str());
  nlohmann::json out = {{"family", f.name}, {"point", point}, {"shape", kernels::shape_key(shape)}, {"seed", seed},
                        {"verified", vr.passed}, {"sass", sass_note}, {"kernels", nlohmann::json::array()}};
  int64_t weights = 0;
  const bool linear = f.op == "linear" || f.op == "linear.frag";
  if (linear || f.op == "dequant") {
    try {
      weights = shape["N"] * shape["K"];
    } catch (const Error&) {
      weights = 0;
    }
  }
  for (const emu::KernelProfile& p : profiles) {
    std::printf("\n  %s: %llu launch(es), %llu blocks\n", p.kernel.c_str(), (unsigned long long)p.launches,
                (unsigned long long)p.blocks);
    print_global("global loads", p.global_loads);
    print_global("global stores", p.global_stores);
    print_shared("shared loads", p.shared_loads);
    print_shared("shared stores", p.shared_stores);
    if (p.cp_waits) {
      std::printf("    cp.async       %llu bytes; at each of %llu waits: %.2f groups, %.0f bytes in flight per thread\n",
                  (unsigned long long)p.cp_async_bytes, (unsigned long long)p.cp_waits, ratio(p.cp_inflight_groups, p.cp_waits),
                  ratio(p.cp_inflight_bytes, p.cp_waits));
    } else {
      std::printf("    loads in flight: not observable (no cp.async; a plain load's first use is not seen by the emulator)\n");
    }
    nlohmann::json kj = {{"kernel", p.kernel}, {"launches", p.launches}, {"blocks", p.blocks},
                         {"global_loads", counters_json(p.global_loads, false)},
                         {"global_stores", counters_json(p.global_stores, false)},
                         {"shared_loads", counters_json(p.shared_loads, true)},
                         {"shared_stores", counters_json(p.shared_stores, true)},
                         {"cp_async", {{"bytes", p.cp_async_bytes}, {"waits", p.cp_waits},
                                       {"groups_in_flight_per_wait", ratio(p.cp_inflight_groups, p.cp_waits)},
                                       {"bytes_in_flight_per_wait", ratio(p.cp_inflight_bytes, p.cp_waits)}}},
                         {"sites", nlohmann::json::array()}};
    for (const auto& s : p.sites) {
      const bool shared = s.kind.find("shared") != std::string::npos || s.kind == "ldmatrix";
      nlohmann::json sj = counters_json(s.c, shared);
      sj["where"] = s.where;
      sj["kind"] = s.kind;
      kj["sites"].push_back(sj);
      if (shared && s.c.wavefronts > s.c.ideal_wavefronts) {
        std::printf("      conflict at %s (%s): %llu extra wavefronts, worst %u-way\n", s.where.c_str(), s.kind.c_str(),
                    (unsigned long long)(s.c.wavefronts - s.c.ideal_wavefronts), s.c.max_ways);
      }
      if (!shared && s.c.sectors > s.c.ideal_sectors && s.c.requests) {
        std::printf("      uncoalesced at %s (%s): %.2f sectors per request, %.0f%% efficient\n", s.where.c_str(),
                    s.kind.c_str(), ratio(s.c.sectors, s.c.requests), 100.0 * ratio(s.c.ideal_sectors, s.c.sectors));
      }
    }
    auto it = mix.find(p.kernel);
    if (it != mix.end()) {
      const compile::SassMix& m = it->second;
      std::string line;
      nlohmann::json mj = {{"total_instructions", m.total_instructions}, {"loop_instructions", m.loop_instructions},
                           {"loop_mix", m.loop_mix}};
      for (const auto& [k, v] : m.loop_mix) line += " " + k + "=" + std::to_string(v);
      if (m.loop_instructions == 0) {
        std::printf("    SASS: %u instructions, no loop\n", m.total_instructions);
      } else {
        std::printf("    SASS main loop: %u of %u instructions:%s\n", m.loop_instructions, m.total_instructions, line.c_str());
      }
      // Instructions per weight, estimated: the loop's trips follow from the emulator's global load requests
      // over the loop's global loads (LDG + LDGSTS) per trip.
      const uint32_t loads = (m.loop_mix.count("LDG") ? m.loop_mix.at("LDG") : 0) +
                             (m.loop_mix.count("LDGSTS") ? m.loop_mix.at("LDGSTS") : 0);
      if (weights > 0 && loads > 0 && m.loop_instructions > 0 && linear) {
        const double trips = double(p.global_loads.requests) / loads;
        const double ipw = trips * m.loop_instructions / double(weights);
        mj["instructions_per_weight_estimate"] = ipw;
        std::printf("    ~%.3f warp instructions per weight (loop trips estimated as %.0f = global load requests / %u loads per trip)\n",
                    ipw, trips, loads);
      }
      kj["sass"] = mj;
    }
    out["kernels"].push_back(kj);
  }
  std::printf("\n  %s\n", sass_note.c_str());
  if (auto path = cli.get_optional("--json")) {
    std::ofstream jf(*path);
    jf << out.dump(1) << "\n";
    if (!jf) throw Error("cannot write " + *path, kExitFailure);
  }
  return vr.passed ? kExitOk : kExitFailure;
}

}  // namespace qt::tune
