#include "tuner/static/roofline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>

#include "common/error.h"
#include "kernels_src/registry/registry.h"

namespace qt::tune {
namespace {

// Public datasheet figures of each architecture's example GPU (arch_limits.cpp names it). Tensor figures are
// dense fp16 with fp32 accumulation; GeForce parts run that at half their fp16-accumulate rate. Hopper's
// mma.sync reaches about two thirds of its wgmma peak (989 TFLOP/s); the sm_90a families issue wgmma.
const std::vector<std::pair<int, GpuPeaks>>& table() {
  static const std::vector<std::pair<int, GpuPeaks>> t = {
      {75, {"T4", 40, 320, 65, 0, 8.1, 1.59}},
      {80, {"A100 SXM 80GB", 108, 2039, 312, 0, 19.5, 1.41}},
      {86, {"RTX 3090", 82, 936, 71, 0, 35.6, 1.695}},
      {89, {"RTX 4090", 128, 1008, 165, 0, 82.6, 2.52}},
      {90, {"H100 SXM", 132, 3350, 660, 989, 67, 1.98}},
  };
  return t;
}

// What one warp keeps in flight where its family does not state it (bytes_in_flight_per_warp): two coalesced
// 16-byte-per-lane loads, an assumption of unrolled code.
constexpr double kWarpBytesInFlight = 1024;

enum class Pipe { kFma, kMma, kWgmma };

Pipe compute_pipe(const kernels::KernelFamily& f) {
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  static std::map<std::string, Pipe> cache;
  auto it = cache.find(f.name);
  if (it != cache.end()) return it->second;
  Pipe pipe = Pipe::kFma;
  if (!f.source.empty()) {
    try {
      // wgmma: the source issues it, or runs the Hopper GEMMs' main loop. Not the word alone, which comments and
      // shared size headers (frag_wgmma_sizes.h) carry into mma.sync kernels too.
      const std::string src = kernels::read_family_source(f);
      const bool wgmma = src.find("qt::wgmma_") != std::string::npos ||
                         src.find("#include \"kernels_src/fraglinear/frag_wgmma_gemm.cuh\"") != std::string::npos;
      pipe = wgmma                                  ? Pipe::kWgmma
             : src.find("mma") != std::string::npos ? Pipe::kMma
                                                    : Pipe::kFma;
    } catch (const Error&) {
      pipe = Pipe::kFma;  // a family whose source cannot be read here is modelled on the CUDA cores
    }
  }
  return cache[f.name] = pipe;
}

double dim_or(const kernels::Shape& s, const char* name, double fallback) {
  for (size_t i = 0; i < s.names.size(); ++i)
    if (s.names[i] == name) return double(s.values[i]);
  return fallback;
}

}  // namespace

KernelResources model_resources(const std::string& name_expression, const compile::KernelResources& compiled) {
  return {name_expression, compiled.registers, compiled.static_smem, compiled.loop_instructions};
}

std::vector<KernelResources> model_resources(const std::vector<compile::KernelReport>& kernels) {
  std::vector<KernelResources> out;
  for (const compile::KernelReport& k : kernels) out.push_back(model_resources(k.name_expression, k.resources));
  return out;
}

const GpuPeaks& gpu_peaks(int sm) {
  for (const auto& [arch, p] : table())
    if (arch == sm) return p;
  throw Error("no GPU figures for sm_" + std::to_string(sm) + " (the roofline model knows sm_75, 80, 86, 89, 90)");
}

GpuPeaks gpu_peaks(const dev::DeviceFingerprint& d) {
  const int sm = d.arch.rfind("sm_", 0) == 0 ? std::atoi(d.arch.c_str() + 3) : 0;
  GpuPeaks p = gpu_peaks(sm);
  p.name = d.name;
  if (d.sm_count > 0) {
    // Per-SM pipes scale with the SM count (their clock is taken as the example GPU's; the issue rate's, below, is
    // the device's own where the fingerprint has it).
    p.tensor_tflops *= double(d.sm_count) / p.sms;
    p.wgmma_tflops *= double(d.sm_count) / p.sms;
    p.fp32_tflops *= double(d.sm_count) / p.sms;
    p.sms = d.sm_count;
  }
  if (d.clock_mhz > 0) p.clock_ghz = d.clock_mhz / 1000.0;  // the device's own boost clock
  // Double data rate: two transfers per memory clock on each bit of the bus.
  if (d.mem_clock_mhz > 0 && d.bus_width_bits > 0) p.dram_gbps = 2.0 * d.mem_clock_mhz * 1e6 * d.bus_width_bits / 8 / 1e9;
  return p;
}

RooflineEstimate estimate_point(const kernels::KernelFamily& f, const kernels::Point& point, const kernels::Shape& shape,
                                int sm, const std::vector<KernelResources>& resources) {
  return estimate_point(f, point, shape, sm, gpu_peaks(sm), resources);
}

RooflineEstimate estimate_point(const kernels::KernelFamily& f, const kernels::Point& point, const kernels::Shape& shape,
                                int sm, const GpuPeaks& peak, const std::vector<KernelResources>& resources) {
  if (f.shape_constraint) {
    const std::string why = f.shape_constraint(point, shape);
    if (!why.empty()) throw kernels::PointRejected(kernels::PointRejected::Reason::Invalid, why);
  }
  const compile::ArchLimits& arch = compile::arch_limits(sm);
  const kernels::LaunchPlan plan = f.plan(point, shape);
  RooflineEstimate e;
  e.bytes = f.bytes_moved ? f.bytes_moved(point, shape) : kernels::plan_bytes_moved(plan);
  const double m = dim_or(shape, "M", 0), n = dim_or(shape, "N", 0), k = dim_or(shape, "K", 0);
  if (m > 0 && n > 0 && k > 0) e.flops = 2 * m * n * k;
  const Pipe pipe = compute_pipe(f);
  const double pipe_tflops = pipe == Pipe::kWgmma && peak.wgmma_tflops > 0 ? peak.wgmma_tflops
                             : pipe == Pipe::kFma                          ? peak.fp32_tflops
                                                                           : peak.tensor_tflops;
  const double needed_bytes = peak.dram_gbps * peak.dram_latency_ns / double(peak.sms);  // GB/s x ns = bytes
  const double achievable = peak.dram_gbps * 1e9 * peak.dram_efficiency;

  e.launch_s = double(plan.launches.size()) * peak.launch_us * 1e-6;
  const double total_bytes = std::max(e.bytes, 1.0);
  // The bytes re-read beyond the DRAM bytes (L2 hits, which hold a load in flight for a shorter latency, save
  // in the families measured otherwise), in DRAM-latency equivalents; all of them the main launch's.
  const double reread_latency_ns = f.rereads_at_dram_latency ? peak.dram_latency_ns : peak.l2_latency_ns;
  const double reread =
      f.bytes_reread ? f.bytes_reread(point, shape, plan) * reread_latency_ns / peak.dram_latency_ns : 0.0;
  // A launch's share of the bytes: those of the buffers it names (a workspace once in each launch that names
  // it: written by one, read back by the next), or of its threads where no launch names a buffer. The flops
  // and the re-reads are the main launch's: a split's reduction or a quantization beside it reads and writes
  // but multiplies nothing.
  const size_t main = kernels::main_launch(plan);
  std::vector<double> named(plan.launches.size(), 0.0);
  double named_all = 0, threads_all = 0;
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    for (const kernels::BufferSpec& b : plan.buffers)
      if (kernels::launch_reads(plan.launches[i], b.name)) named[i] += double(b.bytes());
    named_all += named[i];
    threads_all += double(plan.launches[i].grid.count() * plan.launches[i].block.count());
  }
  // Each launch is modelled alone; the point's time is their sum.
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const kernels::Launch& l = plan.launches[i];
    int regs = 0, loop_instructions = 0;
    int64_t static_smem = 0;
    for (const KernelResources& r : resources)
      if (r.name_expression == l.kernel)
        regs = r.registers, static_smem = r.static_smem, loop_instructions = r.loop_instructions;
    const int threads = int(l.block.count());
    const compile::Occupancy occ = compile::occupancy(arch, regs, threads, static_smem + l.dynamic_smem);
    if (occ.blocks_per_sm == 0)
      throw kernels::PointRejected(kernels::PointRejected::Reason::ResourceFailed, l.kernel + ": " + occ.limiter);
    const double blocks = double(l.grid.count());
    const double slots = double(occ.blocks_per_sm) * peak.sms;
    const double waves = std::ceil(blocks / slots);
    // A grid within one wave is already charged through its resident warps (below); past one, the last partial
    // wave runs with idle slots.
    const double wave_eff = waves <= 1 ? 1.0 : blocks / (waves * slots);
    // A launch that fills few SMs keeps few warps in flight: the resident warps averaged over the SMs.
    const double warps_per_sm = double(occ.warps_per_sm) * std::min(1.0, blocks / slots);
    const double warp_bytes = f.bytes_in_flight_per_warp ? double(f.bytes_in_flight_per_warp(point)) : kWarpBytesInFlight;
    const double in_flight = warps_per_sm * warp_bytes;
    const double comp_eff = std::min(1.0, warps_per_sm / 8.0);
    const double share = named_all > 0 ? named[i] / named_all
                         : threads_all > 0 ? blocks * double(l.block.count()) / threads_all
                                           : 1.0;
    const double bytes = share * total_bytes, requested = bytes + (i == main ? reread : 0.0);
    // The DRAM stream at the achievable bandwidth, or Little's law over every byte the loads request, each
    // SM's loads in flight carrying in_flight bytes per latency: whichever takes longer.
    auto stream_s = [&](double part, double flight) {
      return std::max(part * bytes / achievable, part * requested / achievable * needed_bytes / std::max(flight, 1e-9));
    };
    const double t_dram = bytes / achievable;
    const double t_mem = stream_s(1.0, in_flight);
    // Past one wave, the full waves stream as above and the last, partial one with the DRAM to its few blocks:
    // at the bandwidth its own loads in flight reach (a grid 4% over one wave costs its tail's blocks, not a
    // second wave's time). Compute and issue keep the whole last wave.
    double t_mem_waves = t_mem;
    if (waves > 1) {
      const double full = std::floor(blocks / slots) * slots, tail = blocks - full;
      t_mem_waves = stream_s(full / blocks, in_flight) +
                    stream_s(tail / blocks, double(occ.warps_per_sm) * (tail / slots) * warp_bytes);
    }
    const double t_comp = (i == main ? e.flops : 0.0) / (pipe_tflops * 1e12 * comp_eff);
    // Issue: each SM runs ceil(blocks / SMs) of the blocks that enter the main loop, their every trip's
    // instructions, one a cycle from each scheduler (4) that has a warp, at most as many as it holds at once.
    std::optional<kernels::LoopWork> work;
    if (i == main && f.main_loop) work = f.main_loop(point, shape, plan);
    double t_issue = 0;
    if (work && loop_instructions > 0 && peak.clock_ghz > 0) {
      const kernels::LoopWork& w = *work;
      const double warps_per_block = std::ceil(double(l.block.count()) / 32.0);
      const double blocks_per_sm = std::ceil(w.blocks / double(peak.sms));
      const double resident = std::min(double(occ.warps_per_sm), blocks_per_sm * warps_per_block);
      if (resident > 0)
        t_issue = blocks_per_sm * warps_per_block * w.trips_per_warp * double(loop_instructions) /
                  (std::min(4.0, resident) * peak.clock_ghz * 1e9);
    }
    // A chain of dependent waits: every wave of the blocks that enter the main loop (the grid's, where the family
    // does not say) waits through it once, whatever the bandwidth.
    double t_chain = 0;
    if (i == main && f.latency_chain) {
      const kernels::LatencyChain c = f.latency_chain(point, shape);
      const double chain_waves = work ? std::ceil(work->blocks / slots) : waves;
      t_chain = std::max(1.0, chain_waves) * (c.dram_rounds * peak.dram_latency_ns + c.l2_rounds * peak.l2_latency_ns) * 1e-9;
    }
    e.memory_s += t_mem_waves;
    e.compute_s += t_comp / wave_eff;
    e.issue_s += t_issue;
    e.chain_s += t_chain;
    e.seconds += std::max({t_mem_waves, t_comp / wave_eff, t_issue, t_chain});
    if (i == main)
      e.wave_efficiency = wave_eff, e.memory_efficiency = t_mem > 0 ? t_dram / t_mem : 1.0, e.bytes_in_flight_per_sm = in_flight;
  }
  e.seconds += e.launch_s;
  e.bandwidth_share = e.bytes / e.seconds / (peak.dram_gbps * 1e9);
  const double body = std::max({e.memory_s, e.compute_s, e.issue_s, e.chain_s});
  e.bound = e.launch_s > body      ? "launch"
            : e.memory_s == body   ? "memory"
            : e.compute_s == body  ? "compute"
            : e.issue_s == body    ? "issue"
                                   : "latency";
  return e;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  if (n != b.size()) throw Error("spearman: series of different lengths");
  if (n < 3) return std::numeric_limits<double>::quiet_NaN();
  auto ranks = [n](const std::vector<double>& v) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && v[idx[j + 1]] == v[idx[i]]) ++j;
      for (size_t t = i; t <= j; ++t) r[idx[t]] = 0.5 * double(i + j) + 1;  // ties share their mean rank
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / double(n);
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / double(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
  return sab / std::sqrt(saa * sbb);
}

}  // namespace qt::tune
