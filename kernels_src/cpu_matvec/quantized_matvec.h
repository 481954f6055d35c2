#pragma once
// The CPU's quantized matvec: activations quantized to int8 per weight group, then one SIMD dot product per
// output row over the packed weights (packed_weights.h). The CPU backend runs it for every Q8_0, INT8
// group-wise and AWQ matmul, and the tuner measures it as the `cpu.matvec.*` families; both call this code,
// so a tuned point is exactly what the backend runs.
#include <cstdint>
#include <vector>

#include "kernels_src/cpu_matvec/isa_kernels.h"
#include "kernels_src/cpu_matvec/packed_weights.h"

namespace qt::rt {

class ThreadPool;

// Activations of m rows quantized to int8 per group of the weight's quantization: scale amax/127, round half
// to even. The per-group sums feed the zero-point (AWQ) and additive-offset (ASYM) terms.
struct QuantizedRows {
  int64_t k = 0, group = 0;
  std::vector<int8_t> q;        // [m][k]
  std::vector<float> scale;     // [m][k/group]
  std::vector<int32_t> qsum;    // [m][k/group]
  std::vector<float> sum;       // [m][k/group], of the fp32 activations
};

void quantize_rows(const float* x, int64_t m, int64_t k, int64_t group, QuantizedRows& out);

// Asks for every line of [p, p + bytes). A row-by-row matvec calls it on the next row while it sums this one,
// which keeps the stream going across 4 KB pages, where the hardware prefetcher stops.
void prefetch_bytes(const void* p, int64_t bytes);

// Output rows [n0, n1) of y = x W^T (y is [m][p.rows]) for activations already quantized with p's group.
void quantized_rows(const CpuKernels& kernels, const PackedMatrix& p, const QuantizedRows& xr, int64_t m, int64_t n0,
                    int64_t n1, float* y);

// y = x W^T for m rows: quantize x, then split the output rows into work items of `rows_per_task` on `pool`.
void quantized_matvec(const CpuKernels& kernels, ThreadPool& pool, const PackedMatrix& p, const float* x, int64_t m,
                      int64_t rows_per_task, float* y);

}  // namespace qt::rt
