#pragma once
// A roofline model of a kernel point's time on a GPU, from what is known before any run: the bytes its plan
// moves, the floating-point work its shape implies, and the occupancy its resources allow.
//
//   t = launches x launch cost + sum over launches of max(t_memory / wave efficiency, t_compute / wave efficiency,
//                                                          t_issue)
//   t_memory  = max(bytes / B, (bytes + re-read bytes x L2 latency / DRAM latency) / B x needed / in flight)
//   t_compute = flops / (peak of the pipe the kernel uses x min(1, warps per SM / 8))
//   t_issue   = ceil(looping blocks / SMs) x warps a block x trips a warp x instructions a trip
//               / (min(4, warps an SM holds) x clock)
//   t_chain   = waves x (DRAM round trips x DRAM latency + L2 round trips x L2 latency), for a family whose
//               blocks wait through a chain of dependent loads (KernelFamily::latency_chain), inside the max
// with B the achievable DRAM bandwidth, in flight the bytes one SM's resident warps keep in flight, and needed
// the bytes Little's law asks of each SM to reach B (B x DRAM latency / SMs).
//
// The second term of t_memory is Little's law over every byte the loads request: a tiled GEMM's row blocks each
// load the weights again and its column blocks the activations (KernelFamily::bytes_reread), mostly L2 hits,
// which the same loads in flight must carry. Without it the model priced the mma.sync GEMMs at their tensor
// pipe's rate, 1.1-4.3x too fast on the second H200 run's rows; with it, 16% median error
// (tests/tuner/test_roofline.cpp). A family that states no requested bytes is charged its DRAM bytes only.
// A launch's bytes are those of the buffers it names; the flops and the re-reads are the main launch's
// (kernels::main_launch), not a split's reduction's beside it.
//
// Bytes: every input and output buffer of the plan once, workspaces twice (written, then read back), unless the
// family states what its launches move (KernelFamily::bytes_moved: a KV cache up to the context). Flops:
// 2*M*N*K for families with M, N and K dimensions, else none. The pipe: the tensor cores when the family's
// source issues mma (at wgmma's rate where it issues wgmma, mma.sync's otherwise), else fp32 FMAs. Bytes needed in flight per SM: Little's law, DRAM bandwidth x latency
// over the SMs. Bytes in flight: the resident warps (a grid smaller than one wave counts only the warps it has,
// averaged over the SMs) times 1 KB per warp. Wave efficiency, past one wave: the grid's blocks over the
// resident slots of whole waves.
//
// The GPU's figures are its datasheet's, or, given the device's fingerprint, its own (bandwidth from the memory
// clock and bus width, its SM count). Two constants are calibrated on measurements, each from one independent
// figure of the H200 run (shared/gpu-runs/h200-2026-11-26/report-8b-awq-default.md): the achievable share of
// the DRAM bandwidth (the report's copy loop: 3.91 of 4.80 TB/s) and the launch cost as the tuner times a
// kernel with events (cuBLASLt's fp16 1024 x 4096 GEMV: 9.8 us for 8.4 MB, of which 2.1 us moving it). Other
// architectures take the same two until a run on one of them calibrates its own.
// tests/tuner/test_roofline.cpp holds the model to that run's measured points (rank correlation, median error).
// t_issue: an SM issues at most one warp instruction per scheduler and cycle (4 schedulers on sm_70 and later,
// none idle only while it holds 4 warps), whatever the pipes. It is charged where the family states its main
// loop's work (KernelFamily::main_loop) and the compile has read the loop's instructions from the PTX
// (device/jit/ptx_main_loop.h); without a compile (the tuner's ranking, the step model) there is none. Why it
// exists: the model put the file layout's tiled GEMMs (awq_gemm, q8_0_gemm) at a median of 0.43x their times
// measured on the H200, and their grouped MoE form at 0.37x, while it charged them their memory side alone. Their
// loops issue 650-1,350 instructions for 8-64 mma (the dequant into shared memory and its address arithmetic, in
// every warp's trip). Charged that, the tiled ones are within a median error of 12% from 64 rows; the grouped ones
// move to 0.46x (results/end-to-end-predicted.md, 29 Nov).
// What the model leaves out (dependency and barrier stalls within that issue rate, L2 capacity and eviction, bank
// conflicts, a block's barriers between its phases) is why it is checked on every GPU run's rows (qtune static
// --against): the GPU flow also reports its rank correlation with what it measures.
#include <string>
#include <vector>

#include "device/api/device_fingerprint.h"
#include "device/arch/ptxas_report.h"
#include "device/arch/arch_limits.h"
#include "device/jit/compile_service.h"
#include "kernels_src/registry/family.h"

namespace qt::tune {

// Datasheet peaks of the example GPU of an architecture (ArchLimits::example).
struct GpuPeaks {
  std::string name;
  int sms = 0;
  double dram_gbps = 0;          // peak DRAM bandwidth
  double tensor_tflops = 0;      // fp16 inputs, fp32 accumulation, dense, through mma.sync
  double wgmma_tflops = 0;       // the same through wgmma.mma_async (Hopper's full rate); 0: no wgmma
  double fp32_tflops = 0;        // CUDA-core FMA peak (2 flops per FMA)
  double clock_ghz = 0;          // boost SM clock: 4 warp instructions issued per SM and cycle (one per scheduler)
  double dram_latency_ns = 600;  // loaded latency, for Little's law (an assumption, not a datasheet figure)
  double l2_latency_ns = 300;    // the same for an L2 hit: half of DRAM's, the ratio of the unloaded latencies
                                 // microbenchmarks publish for Hopper (L2 hit about 260 cycles, DRAM about 480)
  double dram_efficiency = 0.81;  // the share of dram_gbps a streaming copy reaches (calibrated, see above)
  double launch_us = 7.7;        // per launch as the tuner times it with events (calibrated, see above)
  // Per launch inside a whole step, back to back in one stream (a decode step replays a CUDA graph): what a
  // launch adds beyond its memory or compute time. Calibrated on the same run's 12-layer AWQ decode (446 tok/s):
  // the step's time less the other kernels' times as measured there (event times less launch_us each, the
  // small kernels' by the model), over the step's 161 launches; tests/tuner/test_step_model.cpp re-derives it
  // from the figures copied into tests/tuner/data/h200-2026-11-26-step.json. It came out close to launch_us:
  // on that run a kernel in the graph cost nearly what it costs alone. One figure cannot say how much of it is
  // the launch and how much the kernels' own ramp and drain (or GEMVs slower in the stream than alone): a run
  // at two layer counts would separate them.
  double stream_launch_us = 5.8;
};
const GpuPeaks& gpu_peaks(int sm);  // throws qt::Error naming an architecture without figures
// The figures of the GPU a fingerprint describes: its architecture's, with its own SM count and, where the
// fingerprint has the memory clock and bus width, its own DRAM bandwidth (an H200 is not the H100 of sm_90).
GpuPeaks gpu_peaks(const dev::DeviceFingerprint& device);

struct RooflineEstimate {
  double seconds = 0;
  double memory_s = 0, compute_s = 0, launch_s = 0, issue_s = 0;
  double chain_s = 0;  // the main launch's chain of dependent waits (KernelFamily::latency_chain), per wave
  double bytes = 0, flops = 0;
  double wave_efficiency = 1;
  double memory_efficiency = 1;  // the main launch's DRAM time over its memory time: 1 where the DRAM stream binds
  double bytes_in_flight_per_sm = 0;  // the main launch's, by the family's statement of its loads
  double bandwidth_share = 0;  // bytes / seconds over the datasheet bandwidth: the predicted share of it
  std::string bound;             // "memory", "compute", "issue", "latency" (the chain) or "launch"
};

// Registers and static shared memory per kernel of the point, where a compile has reported them; missing
// entries (registers 0) leave occupancy to threads and dynamic shared memory alone.
struct KernelResources {
  std::string name_expression;
  int registers = 0;
  int64_t static_smem = 0;
  int loop_instructions = 0;  // of its main loop's trip, by the PTX (compile::KernelResources); 0: not known
};
// The model's view of a compiled kernel.
KernelResources model_resources(const std::string& name_expression, const compile::KernelResources& compiled);
// The same for every kernel of a compiled point (compile::PointResult::kernels).
std::vector<KernelResources> model_resources(const std::vector<compile::KernelReport>& kernels);

// The estimate of `point` at `shape` on `sm`. Throws kernels::PointRejected when the point cannot run there.
RooflineEstimate estimate_point(const kernels::KernelFamily& family, const kernels::Point& point,
                                const kernels::Shape& shape, int sm,
                                const std::vector<KernelResources>& resources = {});
// The same on a GPU described by its figures (gpu_peaks(fingerprint)); `sm` gives its occupancy limits.
RooflineEstimate estimate_point(const kernels::KernelFamily& family, const kernels::Point& point,
                                const kernels::Shape& shape, int sm, const GpuPeaks& peak,
                                const std::vector<KernelResources>& resources = {});

// Spearman's rank correlation of two equally long series (ties take their mean rank); NaN below 3 pairs or
// when either series is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace qt::tune
