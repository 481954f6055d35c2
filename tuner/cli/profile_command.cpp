// qtune profile: a point of a GPU kernel family run once and verified, on the emulator with its memory profile on
// (bank conflicts, sectors per request, bytes, cp.async in flight; device/emu/profile.h), or on the CUDA GPU, where
// that one launch is what a hardware profiler run around the command (Nsight Compute: scripts/gpu/run.sh's
// profile phase) reads the counters of; plus the SASS instruction mix of each kernel's main loop, and the whole
// listing with --sass-out, when nvdisasm is installed.
#include <algorithm>
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
#include "tuner/family/family.h"
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
              "Run one point of a GPU kernel family once, verified against the CPU reference. On the emulator, print "
              "what each kernel asks of the memory system: shared-memory bank conflicts, global sectors per request "
              "and their efficiency, bytes loaded and stored, cp.async data in flight at each wait. On the CUDA GPU, "
              "the one launch is for a hardware profiler around this command (ncu ... qtune profile --device cuda). "
              "With nvdisasm, the SASS instruction mix of each kernel's main loop.");
  cli.option("--device", "D", "emu (observes every lane's accesses) or cuda (one launch, for Nsight Compute to read)", "emu")
      .option("--family", "F", "GPU kernel family (awq_gemv, awq_gemm, awq_dequant, ...)")
      .option("--point", "P", "'p=v,...' (unspecified parameters take their defaults; default: the family's first default point at the shape)")
      .option("--shape", "S", "comma-separated values of the family's dimensions (default: its probe shape)")
      .option("--gpu", "ARCH", "architecture of the SASS mix and listing, and the emulator's (default: sm80, or the family's own; on cuda the GPU's)", "sm80")
      .option("--seed", "N", "input and scheduling seed", "1").range(flag_ranges::kSeed)
      .option("--json", "FILE", "also write the profile as JSON")
      .option("--sass-out", "FILE", "write nvdisasm's listing of the point's kernels for --gpu (an error without nvdisasm)");
  if (!cli.parse(args)) return kExitOk;
  if (auto path = cli.get_optional("--json")) {
    if (const std::string why = output_file_problem(*path); !why.empty()) throw Error("--json " + *path + ": " + why);
  }
  if (auto path = cli.get_optional("--sass-out")) {
    if (const std::string why = output_file_problem(*path); !why.empty()) throw Error("--sass-out " + *path + ": " + why);
  }
  const std::string device = cli.get("--device");
  if (device != "emu" && device != "cuda")
    throw Error("qtune profile: --device must be emu or cuda (got '" + device + "')");
  if (!cli.given("--family")) throw Error("qtune profile needs --family (a GPU kernel family, e.g. awq_gemv)");
  const kernels::KernelFamily& f = kernels::find_family(cli.get("--family"));
  if (f.on_host()) throw Error("kernel family " + f.name + " runs on the host; qtune profile profiles GPU families");
  const kernels::Shape shape = cli.given("--shape") ? f.shape(parse_int_list(cli.get("--shape"), "--shape"), "--shape")
                                                    : f.probe_shape;
  // The family's default at this shape, as the runtime picks it (attention's split count follows the context).
  const kernels::Point point =
      cli.given("--point") ? kernels::parse_point(f, cli.get("--point")) : f.default_points(shape).front();
  if (const std::string why = kernels::point_runs(f, point, shape); !why.empty()) {
    throw Error("point " + kernels::point_key(point) + " cannot run " + kernels::shape_key(shape) + ": " + why);
  }
  // --gpu: the architecture the listing is for and the emulator presents; on the GPU, the GPU's own unless given.
  const int listing_sm = compile::parse_arch(cli.get("--gpu"));
  if (cli.given("--gpu") && listing_sm < f.min_sm)
    throw Error("kernel family " + f.name + " needs sm_" + std::to_string(f.min_sm) + " or newer; --gpu is " +
                compile::arch_name(listing_sm));
  const uint64_t seed = cli.get_int_as<uint64_t>("--seed");

  const std::optional<std::string> nvdisasm = compile::find_nvdisasm();
  if (cli.given("--sass-out") && !nvdisasm)
    throw Error("--sass-out needs nvdisasm, which was not found (PATH, /usr/local/cuda/bin, $QTUNE_NVDISASM or pip "
                "nvidia-cuda-nvdisasm)", kExitUnavailable);

  // Every input is checked above, so on a machine without a GPU --device cuda fails here only for the GPU (exit 3).
  std::vector<emu::KernelProfile> profiles;
  plan::VerifyResult vr;
  std::string where;
  int sm = listing_sm;
  if (device == "emu") {
    emu::EmuOptions o;
    o.profile = true;
    o.seed = seed;
    o.arch = cli.given("--gpu") ? listing_sm : std::max(listing_sm, f.min_sm);
    sm = o.arch;
    emu::EmuDevice dev(o);
    vr = plan::verify_point(&dev, f, point, shape, seed);
    profiles = dev.profiles();
    where = "emulator, seed " + std::to_string(seed);
  } else {
    dev::Device& gpu = worker_device("cuda", 0);
    if (gpu.arch() < f.min_sm)
      throw Error("kernel family " + f.name + " needs sm_" + std::to_string(f.min_sm) + " or newer; this GPU (" +
                  gpu.name() + ") is sm_" + std::to_string(gpu.arch()), kExitUnavailable);
    if (!cli.given("--gpu")) sm = gpu.arch();
    vr = plan::verify_point(&gpu, f, point, shape, seed);
    where = gpu.name() + ", once";
  }

  // SASS mix per kernel, when nvdisasm is available.
  std::map<std::string, compile::SassMix> mix;
  std::string sass_note;
  if (!nvdisasm) {
    sass_note = "nvdisasm not found (PATH, /usr/local/cuda/bin, $QTUNE_NVDISASM or pip nvidia-cuda-nvdisasm): SASS instruction mix skipped";
  } else {
    compile::CompileService service;
    const auto results = service.compile(f, {point}, sm);
    if (results.empty() || !results.front().ok() || !results.front().cubin) {
      if (cli.given("--sass-out"))
        throw Error("--sass-out: NVRTC could not compile " + f.name + " " + kernels::point_key(point) + " for " +
                        compile::arch_name(sm),
                    kExitFailure);
      sass_note = "NVRTC compile failed: SASS instruction mix skipped";
    } else {
      const std::string listing = compile::disassemble(*nvdisasm, *results.front().cubin);
      if (auto path = cli.get_optional("--sass-out")) {
        std::ofstream sf(*path);
        sf << "// " << f.name << " " << kernels::point_key(point) << " for " << compile::arch_name(sm) << " (NVRTC CUBIN, "
           << *nvdisasm << " -c)\n"
           << listing;
        if (!sf) throw Error("cannot write " + *path, kExitFailure);
      }
      const auto mixes = compile::sass_mix_of(listing);
      for (const auto& k : results.front().kernels)
        for (const auto& m : mixes)
          if (m.function == k.lowered_name) mix[k.name_expression] = m;
      sass_note = "SASS of the NVRTC CUBIN for " + compile::arch_name(sm) + " via " + *nvdisasm;
    }
  }

  std::printf("qtune profile: %s %s on %s (%s): %s\n", f.name.c_str(), kernels::point_key(point).c_str(),
              kernels::shape_key(shape).c_str(), where.c_str(),
              vr.passed ? "verified against the CPU reference" : ("VERIFICATION FAILED: " + vr.message).c_str());
  nlohmann::json out = {{"family", f.name}, {"point", point}, {"shape", kernels::shape_key(shape)}, {"seed", seed},
                        {"device", device},
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
  if (device == "cuda") {
    // The hardware's counters are the profiler's to read; what is known here is each kernel's machine code.
    std::printf("\n  memory counters: the emulator's only (--device emu); on the GPU, read them with Nsight Compute around this command\n");
    for (const auto& [kernel, m] : mix) {
      std::string line;
      for (const auto& [k, v] : m.loop_mix) line += " " + k + "=" + std::to_string(v);
      std::printf("\n  %s\n    SASS main loop: %u of %u instructions:%s\n", kernel.c_str(), m.loop_instructions,
                  m.total_instructions, line.c_str());
      out["kernels"].push_back({{"kernel", kernel},
                                {"sass", {{"total_instructions", m.total_instructions},
                                          {"loop_instructions", m.loop_instructions},
                                          {"loop_mix", m.loop_mix}}}});
    }
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
