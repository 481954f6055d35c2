#pragma once
// The Q8_0 (and INT8_GW_SYM) weights of the fast path's GEMM (q8_gemm_kernels.h), repacked once at load time
// from the file's int8 + scales, and AWQ INT4's from its packed words, zero points and fp16 scales. The repacked
// matrix is about the size of the file's tensor (Q8: 1 byte per weight, 4 per group scale; U4: half a byte per
// weight, 4 per group's scale and zero point) and replaces it: once a tensor is repacked, its pages of the file mapping are handed back
// to the kernel (they are only read again if something else reads that tensor, such as the embedding rows of
// a tied classifier), so resident memory holds one copy of the weights, not two.
#include <cstdint>
#include <vector>

#include "common/large_pages.h"
#include "models/core/weights.h"
#include "runtime/cpu/q8_gemm_kernels.h"

namespace qt::rt {

class ThreadPool;

// One matrix in the GEMM layout (a view into a RepackedSet's memory): Q8_0 and INT8_GW_SYM in Q8 panels, AWQ INT4
// in U4 panels (q8_gemm_kernels.h, PanelFormat).
struct RepackedQ8 {
  PanelFormat format = PanelFormat::kQ8;
  int64_t rows = 0, cols = 0, group = 0, panels = 0;
  // [panels] x panel_bytes(): weights, scales (and U4's zero points), layout of q8_gemm_kernels.h; rows past
  // `rows` have weight 0, zero point 0 and scale 0.
  const uint8_t* w = nullptr;
  int64_t panel_bytes() const;
  const uint8_t* panel(int64_t p) const { return w + p * panel_bytes(); }
  // The values dequantize_row() gives for the source tensor: q * scale, or (q - zero) * scale.
  void dequantize_row(int64_t row, float* out) const;
};

// The GEMM layouts of several matrices in one allocation, one after the other in the order given. The
// experts of a MoE projection are repacked as one set: an expert's matrix alone is under the 2 MiB of a huge
// page, 128 of them are far over, so they are read like the dense panels, one TLB entry per 2 MiB instead of
// one per 4 KiB.
struct RepackedSet {
  LargePageBuffer weights;
  std::vector<RepackedQ8> matrices;  // in the order the tensors were given
};

// Whether `t` can take the GEMM layout: Q8_0 or INT8_GW_SYM (the same numbers: int8 weights, a float scale per
// group) with a group that is a multiple of 4.
bool repackable_q8(const QTensor& t);
// Whether `t` can take the U4 panels: AWQ INT4 with a group that is a multiple of 8.
bool repackable_u4(const QTensor& t);
// Either.
bool repackable_panels(const QTensor& t);

// Repacks every tensor of `ts` (repackable_panels must hold for each), releasing their source pages as it goes.
// `pool` may be null.
RepackedSet repack_panels(const std::vector<QTensor>& ts, ThreadPool* pool);

// Tells the kernel that a Q8_0 tensor is read a row here and there (the embedding table, whose rows are read
// by token id): no read-ahead around each row read, which would bring megabytes back for a few tokens. A
// hint only, whatever owns the memory.
void advise_random_rows(const QTensor& t);

}  // namespace qt::rt
