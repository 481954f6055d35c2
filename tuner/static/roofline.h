#pragma once
// A roofline model of a kernel point's time on a GPU, from what is known before any run: the bytes its plan
// moves, the floating-point work its shape implies, and the occupancy its resources allow.
//
//   t = launches x launch overhead + max(t_memory, t_compute) / wave efficiency
//   t_memory  = bytes / (DRAM bandwidth x min(1, warps resident per SM / warps needed in flight))
//   t_compute = flops / (peak of the pipe the kernel uses x min(1, warps per SM / 8))
//
// Bytes: every input and output buffer of the plan once, workspaces twice (written, then read back). Flops:
// 2*M*N*K for families with M, N and K dimensions, else none. The pipe: the tensor cores when the family's
// source issues mma, else fp32 FMAs. Warps needed in flight: Little's law, DRAM bandwidth x latency per SM over
// one warp's 1 KB in flight; a grid smaller than one wave counts only the warps it has, averaged over the SMs.
// Wave efficiency, past one wave: the grid's blocks over the resident slots of whole waves.
// What the model leaves out (instruction issue limits beyond the FLOP pipe, L2 reuse, bank conflicts) is why it
// orders points rather than predicting times: the GPU flow reports its rank correlation with what it measures.
#include <string>
#include <vector>

#include "device/arch/arch_limits.h"
#include "kernels_src/registry/family.h"

namespace qt::tune {

// Datasheet peaks of the example GPU of an architecture (ArchLimits::example).
struct GpuPeaks {
  const char* name = "";
  int sms = 0;
  double dram_gbps = 0;          // peak DRAM bandwidth
  double tensor_tflops = 0;      // fp16 inputs, fp32 accumulation, dense, through mma.sync
  double fp32_tflops = 0;        // CUDA-core FMA peak (2 flops per FMA)
  double dram_latency_ns = 600;  // loaded latency, for Little's law (an assumption, not a datasheet figure)
  double launch_us = 3;          // per launch, back to back on one stream
};
const GpuPeaks& gpu_peaks(int sm);  // throws qt::Error naming an architecture without figures

struct RooflineEstimate {
  double seconds = 0;
  double memory_s = 0, compute_s = 0, launch_s = 0;
  double bytes = 0, flops = 0;
  double wave_efficiency = 1;
  double memory_efficiency = 1;  // the Little's-law factor
  std::string bound;             // "memory", "compute" or "launch"
};

// Registers and static shared memory per kernel of the point, where a compile has reported them; missing
// entries (registers 0) leave occupancy to threads and dynamic shared memory alone.
struct KernelResources {
  std::string name_expression;
  int registers = 0;
  int64_t static_smem = 0;
};

// The estimate of `point` at `shape` on `sm`. Throws kernels::PointRejected when the point cannot run there.
RooflineEstimate estimate_point(const kernels::KernelFamily& family, const kernels::Point& point,
                                const kernels::Shape& shape, int sm,
                                const std::vector<KernelResources>& resources = {});

// Spearman's rank correlation of two equally long series (ties take their mean rank); NaN below 3 pairs or
// when either series is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace qt::tune
