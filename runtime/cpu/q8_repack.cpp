#include "runtime/cpu/q8_repack.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "common/mapped_file.h"
#include "kernels_src/cpu_matvec/thread_pool.h"
#include "models/core/weight_traits.h"
#include "runtime/cpu/q8_gemm_kernels.h"

namespace qt::rt {
namespace {

// Gives back the whole pages inside [p, p + bytes). A model file's pages are unmapped from this process but
// stay in the page cache, so the next run that maps the file does not read it from disk. Other memory (a
// model built in memory) is only asked to be reclaimed: MADV_PAGEOUT never changes what memory reads
// (anonymous pages are swapped, or kept where there is no swap).
void release_pages(const void* p, uint64_t bytes) {
  if (release_mapped_pages(p, bytes)) return;
#ifdef MADV_PAGEOUT
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (reinterpret_cast<uint64_t>(p) + page - 1) / page * page;
  const uint64_t end = (reinterpret_cast<uint64_t>(p) + bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)p, (void)bytes;
#endif
}

void advise_range(const void* p, uint64_t bytes, int advice) {
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = reinterpret_cast<uint64_t>(p) / page * page;
  const uint64_t end = reinterpret_cast<uint64_t>(p) + bytes;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

constexpr int64_t kPanelsPerBlock = 64;  // 1024 rows: the source pages behind a block are released at once

}  // namespace

bool repackable_q8(const QTensor& t) {
  const bool int8 = t.type == WeightType::Q8_0 || t.type == WeightType::INT8_GW_SYM;
  return int8 && !t.empty() && t.group_size > 0 && t.group_size % 4 == 0 && t.cols % t.group_size == 0;
}

bool repackable_u4(const QTensor& t) {
  return t.type == WeightType::AWQ_INT4 && !t.empty() && t.group_size > 0 && t.group_size % kU4StepColumns == 0 &&
         t.cols % t.group_size == 0 && t.rows % 8 == 0;
}

bool repackable_panels(const QTensor& t) { return repackable_q8(t) || repackable_u4(t); }

int64_t RepackedQ8::panel_bytes() const { return qt::rt::panel_bytes(format, cols, group); }

void RepackedQ8::dequantize_row(int64_t row, float* out) const {
  const uint8_t* p = panel(row / kQ8PanelRows);
  const int64_t r = row % kQ8PanelRows;
  if (format == PanelFormat::kU4) {
    for (int64_t g = 0; g < cols / group; ++g) {
      const uint8_t* wg = p + g * u4_group_bytes(group) + r * 4;
      const float s = half_bits_to_float(u4_group_scales(p, group, g)[r]);
      const int32_t z = u4_group_zeros(p, group, g)[r];
      for (int64_t c = 0; c < group; ++c) {
        const uint8_t b = wg[(c / kU4StepColumns) * 64 + c % 4];
        out[g * group + c] = float(int32_t(c % kU4StepColumns < 4 ? b & 15 : b >> 4) - z) * s;
      }
    }
    return;
  }
  for (int64_t g = 0; g < cols / group; ++g) {
    const uint8_t* wg = p + g * q8_group_bytes(group) + r * 4;
    const float s = q8_group_scales(p, group, g)[r];
    for (int64_t c = 0; c < group; ++c) out[g * group + c] = float(int32_t(wg[(c / 4) * 64 + c % 4]) - 128) * s;
  }
}

void advise_random_rows(const QTensor& t) {
  if (t.type != WeightType::Q8_0 || t.empty()) return;
  advise_range(t.data, uint64_t(t.rows * t.cols), MADV_RANDOM);
  advise_range(t.scales_f32, uint64_t(t.rows * t.cols / t.group_size) * sizeof(float), MADV_RANDOM);
}

namespace {

// Repacks t into w (sized for its panels), releasing the source pages as it goes.
void repack_into(const QTensor& t, int64_t panels, uint8_t* w, ThreadPool* pool) {
  const int64_t N = t.rows, K = t.cols, G = t.group_size, ng = K / G, gb = q8_group_bytes(G);
  // Q8_0 is row-major int8 q; INT8_GW_SYM is in-major [K][N] uint8 q + 128 with fp16 scales [K/G][N]. Either
  // way a panel byte is the weight + 128, written 4 columns of a row at a time.
  const bool in_major = t.type == WeightType::INT8_GW_SYM;
  const auto* q = static_cast<const uint8_t*>(t.data);
  auto pack = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* wp = w + p * q8_panel_bytes(K, G);
      for (int64_t row = 0; row < kQ8PanelRows; ++row) {
        const int64_t n = p * kQ8PanelRows + row;
        for (int64_t g = 0; g < ng; ++g) {
          uint8_t* wg = wp + g * gb + row * 4;
          for (int64_t c = g * G; c < (g + 1) * G; c += 4, wg += 64) {
            uint32_t v = 0x80808080u;  // rows past the matrix: weight 0, and scale 0 below; never stored to an output
            if (n < N && in_major) {
              v = uint32_t(q[c * N + n]) | uint32_t(q[(c + 1) * N + n]) << 8 | uint32_t(q[(c + 2) * N + n]) << 16 |
                  uint32_t(q[(c + 3) * N + n]) << 24;
            } else if (n < N) {
              std::memcpy(&v, q + n * K + c, 4);
              v ^= 0x80808080u;
            }
            std::memcpy(wg, &v, 4);
          }
          const float s = n >= N    ? 0.0f
                          : in_major ? half_bits_to_float(t.scales_f16[g * N + n])
                                     : t.scales_f32[n * ng + g];
          std::memcpy(wg, &s, 4);  // wg is now at the group's scales, this row's
        }
      }
    }
  };
  for (int64_t b0 = 0; b0 < panels; b0 += kPanelsPerBlock) {
    const int64_t b1 = std::min(panels, b0 + kPanelsPerBlock);
    if (pool) {
      pool->parallel_for(b1 - b0, 1, [&](int64_t i0, int64_t i1) { pack(b0 + i0, b0 + i1); });
    } else {
      pack(b0, b1);
    }
    const int64_t n0 = b0 * kQ8PanelRows, n1 = std::min(N, b1 * kQ8PanelRows);
    if (!in_major) release_pages(q + n0 * K, uint64_t((n1 - n0) * K));
  }
  if (in_major) {
    release_pages(q, uint64_t(N * K));
    release_pages(t.scales_f16, uint64_t(N * ng) * sizeof(uint16_t));
  } else {
    release_pages(t.scales_f32, uint64_t(N * ng) * sizeof(float));
  }
}

// The AWQ tensor t (qweight [K][N/8] words, element n = 8 j + e of word j its nibble kAwqOrder[e]; qzeros
// [K/G][N/8] alike; fp16 scales [K/G][N]) into U4 panels at w. A panel's 16 rows are two words of each row of
// qweight: a step's 8 columns are 8 words, which give each of their 8 rows its 4 bytes of the step at once. The
// source pages are released at the end, the tensor being in-major.
void repack_u4_into(const QTensor& t, int64_t panels, uint8_t* w, ThreadPool* pool) {
  const int64_t N = t.rows, K = t.cols, G = t.group_size, ng = K / G, words = N / 8, gb = u4_group_bytes(G);
  const auto* qw = static_cast<const uint32_t*>(t.data);
  const auto* qz = reinterpret_cast<const uint32_t*>(t.qzeros);
  auto pack = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* wp = w + p * u4_panel_bytes(K, G);
      std::memset(wp, 0, size_t(u4_panel_bytes(K, G)));  // rows past the matrix: weight, zero and scale 0
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t j = p * 2 + half;  // the word of rows 8 j .. 8 j + 7
        if (j >= words) break;
        for (int64_t g = 0; g < ng; ++g) {
          uint8_t* wg = wp + g * gb;
          for (int64_t s = 0; s < G / kU4StepColumns; ++s) {
            uint32_t col[kU4StepColumns];
            for (int64_t i = 0; i < kU4StepColumns; ++i) col[i] = qw[(g * G + s * kU4StepColumns + i) * words + j];
            for (int64_t e = 0; e < 8; ++e) {
              uint32_t v = 0;
              for (int i = 0; i < 4; ++i) v |= (awq_nibble(col[i], e) | awq_nibble(col[i + 4], e) << 4) << (8 * i);
              std::memcpy(wg + s * 64 + (half * 8 + e) * 4, &v, 4);
            }
          }
          auto* scales = wg + G * kQ8PanelRows / 2;
          for (int64_t e = 0; e < 8; ++e) {
            const int64_t r = half * 8 + e, n = j * 8 + e;
            std::memcpy(scales + 2 * r, &t.scales_f16[g * N + n], 2);
            scales[2 * kQ8PanelRows + r] = uint8_t(awq_nibble(qz[g * words + j], e));
          }
        }
      }
    }
  };
  if (pool) {
    pool->parallel_for(panels, 1, pack);
  } else {
    pack(0, panels);
  }
  release_pages(qw, uint64_t(K * words) * sizeof(uint32_t));
  release_pages(qz, uint64_t(ng * words) * sizeof(uint32_t));
  release_pages(t.scales_f16, uint64_t(ng * N) * sizeof(uint16_t));
}

}  // namespace

RepackedSet repack_panels(const std::vector<QTensor>& ts, ThreadPool* pool) {
  RepackedSet set;
  // Each matrix's panels are a multiple of 64 bytes, so every one starts on a cache line.
  std::vector<size_t> weight_at;
  size_t weight_bytes = 0;
  for (const QTensor& t : ts) {
    if (!repackable_panels(t))
      throw Error("repack_panels: the tensor is not Q8_0 or INT8_GW_SYM with a group that is a multiple of 4, nor "
                  "AWQ INT4 with a group that is a multiple of 8");
    RepackedQ8 r;
    r.format = repackable_u4(t) ? PanelFormat::kU4 : PanelFormat::kQ8;
    r.rows = t.rows, r.cols = t.cols, r.group = t.group_size;
    r.panels = (t.rows + kQ8PanelRows - 1) / kQ8PanelRows;
    weight_at.push_back(weight_bytes);
    weight_bytes += size_t(r.panels * r.panel_bytes());
    set.matrices.push_back(r);
  }
  set.weights = LargePageBuffer(weight_bytes);
  for (size_t i = 0; i < ts.size(); ++i) {
    RepackedQ8& r = set.matrices[i];
    uint8_t* w = set.weights.data() + weight_at[i];
    if (r.format == PanelFormat::kU4) {
      repack_u4_into(ts[i], r.panels, w, pool);
    } else {
      repack_into(ts[i], r.panels, w, pool);
    }
    r.w = w;
  }
  return set;
}

}  // namespace qt::rt
