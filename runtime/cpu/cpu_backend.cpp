#include "runtime/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "kernels_src/cpu_matvec/quantized_matvec.h"
#include "runtime/cpu/amx_support.h"

namespace qt::rt {
namespace {

class HostBuffer final : public DeviceBuffer {
 public:
  // Activation buffers start zeroed. A KV cache is not: every row is written before it is read, and pages of
  // context never reached then never become resident.
  HostBuffer(size_t n, ActType type, bool zero)
      : data_(::operator new(std::max<size_t>(n, 1) * act_size(type), std::align_val_t(64))), n_(n), type_(type) {
    if (zero) std::memset(data_, 0, std::max<size_t>(n, 1) * act_size(type));
  }
  ~HostBuffer() override { ::operator delete(data_, std::align_val_t(64)); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  Act view() override { return Act{reinterpret_cast<uint64_t>(data_), type_}; }
  size_t size() const override { return n_; }

 private:
  void* data_;
  size_t n_;
  ActType type_;
};

uint16_t* f16(Act a) { return reinterpret_cast<uint16_t*>(a.addr); }

thread_local std::vector<float> tls_row;
thread_local std::vector<float> tls_scores;

TileUnit default_tiles(Isa isa) {
  return isa == Isa::kAvx512Vnni && amx_support().usable ? TileUnit::kAmx : TileUnit::kNone;
}

// The tile unit the options ask for, or this CPU's default. Asked-for AMX tiles the CPU cannot use fail here,
// naming why, before the GEMM kernels check the ISA: on a CPU with neither AMX nor AVX-512 the missing tiles
// are the reason to report.
TileUnit chosen_tiles(const CpuOptions& options, Isa isa) {
  if (options.reference) return TileUnit::kNone;
  const TileUnit tiles = options.tiles.value_or(default_tiles(isa));
  if (tiles == TileUnit::kAmx && !amx_support().usable)
    throw Error("AMX tiles are not usable here: " + amx_support().detail);
  return tiles;
}

}  // namespace

CpuBackend::CpuBackend(const CpuOptions& options)
    : options_(options),
      kernels_(&kernels_for(options.isa.value_or(detect_isa()))),
      attn_(&attention_kernels_for(kernels_->isa)),
      tiles_(chosen_tiles(options, kernels_->isa)),
      gemm_(&q8_gemm_kernels_for(kernels_->isa, tiles_, options.decode_prefetch.value_or(DecodePrefetch::kL2))),
      kv_type_(options.reference ? ActType::F32 : options.kv_cache.value_or(ActType::F16)),
      pool_(options.threads > 0 ? options.threads : default_thread_count()) {}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::name() const {
  const std::string tiles = tiles_ == TileUnit::kNone ? "" : std::string("+") + gemm_->tiles;
  // Named only where there is a prefetch to choose (not on the scalar kernels), and not the default's.
  const bool named = !options_.reference && kernels_->isa != Isa::kScalar;
  const DecodePrefetch p = gemm_->decode_prefetch;
  const std::string prefetch = !named || p == DecodePrefetch::kL2 ? ""
                               : p == DecodePrefetch::kNone       ? "-no-prefetch"
                                                                  : "-l1-prefetch";
  return std::string("cpu-") + (options_.reference ? "reference" : "fast") + "-" + isa_name(kernels_->isa) + tiles +
         "-" + std::to_string(pool_.threads()) + "t" + prefetch;
}

void CpuBackend::set_decode_prefetch(DecodePrefetch prefetch) {
  options_.decode_prefetch = prefetch;
  gemm_ = &q8_gemm_kernels_for(kernels_->isa, tiles_, prefetch);
}

void CpuBackend::prepare(const ModelWeights& weights) {
  if (options_.reference) return;
  if (!options_.kv_cache && weights.config.is_moe()) kv_type_ = ActType::F32;
  // The row layouts of what the panels do not take (a repacked tensor's file pages are gone).
  auto add = [&](const QTensor& t) {
    if (!t.empty() && !repacked(t)) packed(t);
  };
  // Every matrix that can take the GEMM layout gets it here: the dense matrices as one set, each MoE
  // projection's experts as another. Nothing is held twice: each tensor's file pages are released behind its repack. So the
  // MoE experts are read like the dense panels (huge pages, anonymous memory the page cache cannot drop under
  // the model), and every call, from the first, finds them ready.
  // The dense matrices are one set, laid out in the order a decode step reads them (each layer's q, k, v, o,
  // gate, up, down, then the classifier): one stream through one huge-page mapping, where one allocation per
  // matrix left the 1 MiB ones (the 0.6B shape's k and v) and every scale array on 4 KiB heap pages, the tail
  // of each 3 MiB one outside a huge page, and a break in the stream at every matrix. A stand-alone loop over
  // the 0.6B shape's matrices (1 thread, AMD EPYC) streamed them 4-11 % slower that way.
  std::vector<QTensor> dense;
  for (const auto& l : weights.layers)
    for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w3, &l.w2})
      if (repackable_panels(*t)) dense.push_back(*t);
  const QTensor& head = weights.classifier.empty() ? weights.embedding : weights.classifier;
  if (repackable_panels(head)) dense.push_back(head);
  repack(dense);
  advise_random_rows(weights.embedding);
  add(weights.classifier);
  for (const auto& l : weights.layers) {
    for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3, &l.router}) add(*t);
    for (const ExpertStack* s : {&l.expert_w1, &l.expert_w2, &l.expert_w3}) {
      std::vector<QTensor> experts;
      for (int64_t e = 0; e < s->experts; ++e) experts.push_back(s->expert(e));
      if (!experts.empty() && repackable_panels(experts[0])) {
        repack(experts);
      } else {
        for (const QTensor& x : experts) add(x);
      }
    }
  }
}

bool CpuBackend::repack(const QTensor& w) { return repack(std::vector<QTensor>{w}); }

bool CpuBackend::repack(const std::vector<QTensor>& ws) {
  if (options_.reference) return false;
  std::vector<QTensor> todo;
  for (const QTensor& w : ws) {
    if (!repackable_panels(w)) return false;
    const bool listed = std::any_of(todo.begin(), todo.end(), [&](const QTensor& t) { return t.data == w.data; });
    if (!repacked(w) && !listed) todo.push_back(w);
  }
  if (todo.empty()) return true;
  auto set = std::make_unique<RepackedSet>(repack_panels(todo, &pool_));
  std::lock_guard<std::mutex> lock(packed_mutex_);
  for (size_t i = 0; i < todo.size(); ++i) repacked_[todo[i].data] = &set->matrices[i];
  repacked_sets_.push_back(std::move(set));
  return true;
}

const RepackedQ8* CpuBackend::repacked(const QTensor& w) const {
  if (repacked_.empty()) return nullptr;
  const auto it = repacked_.find(w.data);
  if (it == repacked_.end() || it->second->rows != w.rows || it->second->cols != w.cols) return nullptr;
  return it->second;
}

void CpuBackend::gemm_q8(const RepackedQ8* const* mats, float* const* ys, int count, const float* x, int64_t m) {
  gemm_q8(mats, ys, count, x, {0, m});
}

// One quantization of x serves every matrix; work items are runs of panels of one matrix, each against all
// the rows of one group, so a panel's weights are read from memory once per call and reused from cache across
// those tokens. Groups are the experts of a MoE projection (rows [offsets[e], offsets[e+1]) of x, matrix
// mats[j * groups + e], null when the group has no rows); a dense matmul is one group of all m rows.
void CpuBackend::gemm_q8(const RepackedQ8* const* mats, float* const* ys, int count, const float* x,
                         const std::vector<int64_t>& offsets) {
  thread_local QuantizedRows scratch_rows;
  QuantizedRows& xq = scratch_rows;  // named outside the lambda: see quantized_matvec
  const Q8GemmKernels& kr = *gemm_;
  const int64_t groups = int64_t(offsets.size()) - 1, m = offsets.back();
  const RepackedQ8* first = nullptr;
  for (int64_t i = 0; !first && i < count * groups; ++i) first = mats[i];
  if (!first) return;
  const int64_t K = first->cols, G = first->group, ng = K / G;
  xq.k = K, xq.group = G;
  xq.q.resize(size_t(m * K));
  xq.scale.resize(size_t(m * ng));
  xq.qsum.resize(size_t(m * ng));
  auto quantize = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      kr.quantize_row(x + i * K, K, G, xq.q.data() + i * K, xq.scale.data() + i * ng, xq.qsum.data() + i * ng);
  };
  if (m * K >= kSplitElements) {
    pool_.parallel_for(m, std::max<int64_t>(1, m / (4 * int64_t(pool_.threads()))), quantize);
  } else {
    quantize(0, m);
  }
  struct Segment {
    int mat;
    int64_t group, p0, p1;
  };
  std::vector<Segment> segments;
  int64_t total = 0;
  for (int64_t i = 0; i < count * groups; ++i) total += mats[i] ? mats[i]->panels : 0;
  // Guided scheduling: the pool hands the items out in order, and each takes a share of the panels still left
  // (1 / (2 x threads)), so items shrink toward the end and the threads finish within about a panel of each
  // other. With equal items (an eighth of a thread's share each) the thread that ended first waited half an
  // item on average, while one thread alone cannot draw the whole memory bandwidth: decode lost several
  // percent of it at 2 threads.
  const int64_t shares = 2 * int64_t(pool_.threads());
  int64_t left = total;
  for (int j = 0; j < count; ++j)
    for (int64_t e = 0; e < groups; ++e)
      if (const RepackedQ8* r = mats[j * groups + e])
        for (int64_t p = 0; p < r->panels;) {
          const int64_t n = std::min(r->panels - p, std::max<int64_t>(1, left / shares));
          segments.push_back(Segment{j, e, p, p + n});
          p += n, left -= n;
        }
  pool_.parallel_for(int64_t(segments.size()), 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const Segment& seg = segments[size_t(s)];
      const RepackedQ8& r = *mats[seg.mat * groups + seg.group];
      const int64_t r0 = offsets[size_t(seg.group)], rows = offsets[size_t(seg.group) + 1] - r0;
      run_panels(kr, r.format, r.panel(seg.p0), seg.p1 - seg.p0, K, r.group, xq.q.data() + r0 * K, K,
                 xq.scale.data() + r0 * ng, xq.qsum.data() + r0 * ng, ng, rows,
                 ys[seg.mat] + r0 * r.rows + seg.p0 * kQ8PanelRows, r.rows, r.rows - seg.p0 * kQ8PanelRows);
    }
  });
}

const PackedMatrix& CpuBackend::packed(const QTensor& w) {
  std::lock_guard<std::mutex> lock(packed_mutex_);
  auto it = packed_.find(w.data);
  if (it != packed_.end() && it->second->rows == w.rows && it->second->cols == w.cols) return *it->second;
  auto p = std::make_unique<PackedMatrix>(pack_for_cpu(w, &pool_));
  const PackedMatrix& ref = *p;
  packed_[w.data] = std::move(p);
  return ref;
}

std::unique_ptr<DeviceBuffer> CpuBackend::alloc(size_t elements) {
  return std::make_unique<HostBuffer>(elements, ActType::F32, true);
}
std::unique_ptr<DeviceBuffer> CpuBackend::alloc_kv(size_t elements) {
  return std::make_unique<HostBuffer>(elements, kv_type_, false);
}
void CpuBackend::upload(const float* src, size_t n, Act dst) {
  if (dst.type == ActType::F16) return attn_->to_f16(src, int64_t(n), f16(dst));
  std::memcpy(dst.f32(), src, n * sizeof(float));
}
void CpuBackend::download(Act src, size_t n, float* dst) {
  if (src.type == ActType::F16) return attn_->from_f16(f16(src), int64_t(n), dst);
  std::memcpy(dst, src.f32(), n * sizeof(float));
}

void CpuBackend::embed(const QTensor& table, const int32_t* tokens, int64_t m, Act out_act) {
  float* out = out_act.f32();
  for (int64_t i = 0; i < m; ++i) {
    if (tokens[i] < 0 || tokens[i] >= table.rows)
      throw Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary [0, " +
                  std::to_string(table.rows) + ")");
  }
  // A tied table was repacked as the classifier: its rows are read from that copy, so the file's pages
  // released behind the repack are not brought back.
  const RepackedQ8* r = repacked(table);
  pool_.parallel_for(m, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      if (r) {
        r->dequantize_row(tokens[i], out + i * table.cols);
      } else {
        dequantize_row(table, tokens[i], out + i * table.cols);
      }
    }
  });
}

int64_t CpuBackend::rows_per_task(const QTensor& w) const {
  if (!options_.rows_per_task_by_shape.empty()) {
    const auto it = options_.rows_per_task_by_shape.find(MatvecShapeKey{w.type, w.rows, w.cols, w.group_size});
    if (it != options_.rows_per_task_by_shape.end() && it->second > 0) return it->second;
  }
  if (options_.rows_per_task > 0) return options_.rows_per_task;
  const int64_t n_rows = w.rows;
  // About 8 work items per thread balances load while each item still streams a few KB of weights.
  const int64_t per = n_rows / (int64_t(pool_.threads()) * 8);
  return std::clamp<int64_t>(per, 4, 256);
}

void CpuBackend::matmul(const QTensor& w, Act x_act, int64_t m, Act y_act, MatmulMode mode) {
  if (m <= 0) return;
  const float* x = x_act.f32();
  float* y = y_act.f32();
  if (options_.reference) return matmul_reference(w, x, m, y);
  const bool float_type = !weight_traits(w.type).quantized;
  if (float_type || mode == MatmulMode::kExact) return matmul_float(w, x, m, y);
  if (const RepackedQ8* r = repacked(w)) return gemm_q8(&r, &y, 1, x, m);
  const PackedMatrix& p = packed(w);
  if (p.kind == PackedMatrix::Kind::kUnpacked) return matmul_float(w, x, m, y);
  matmul_quantized(w, p, x, m, y);
}

void CpuBackend::matmul_reference(const QTensor& w, const float* x, int64_t m, float* y) {
  const int64_t N = w.rows, K = w.cols;
  pool_.parallel_for(N, rows_per_task(w), [&](int64_t n0, int64_t n1) {
    float* row = grown(tls_row, K);
    for (int64_t n = n0; n < n1; ++n) {
      dequantize_row(w, n, row);
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x + i * K;
        double acc = 0.0;
        for (int64_t k = 0; k < K; ++k) acc += double(row[k]) * double(xi[k]);
        y[i * N + n] = float(acc);
      }
    }
  });
}

void CpuBackend::matmul_float(const QTensor& w, const float* x, int64_t m, float* y) {
  const int64_t N = w.rows, K = w.cols;
  const CpuKernels& kr = *kernels_;
  pool_.parallel_for(N, rows_per_task(w), [&](int64_t n0, int64_t n1) {
    if (weight_traits(w.type).quantized) {
      // Each row dequantized once for all m activation rows (the MoE router at prefill: 512 rows x 128).
      float* row = grown(tls_row, K);
      for (int64_t n = n0; n < n1; ++n) {
        dequantize_row(w, n, row);
        for (int64_t i = 0; i < m; ++i) y[i * N + n] = kr.dot_f32(row, x + i * K, K);
      }
      return;
    }
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * K;
      float* yi = y + i * N;
      switch (w.type) {
        case WeightType::F32:
          for (int64_t n = n0; n < n1; ++n) yi[n] = kr.dot_f32(static_cast<const float*>(w.data) + n * K, xi, K);
          break;
        case WeightType::F16:
          // An AWQ model's classifier: the largest matrix of its decode step, from the file's 4 KB pages.
          for (int64_t n = n0; n < n1; ++n) {
            const auto* row = static_cast<const uint16_t*>(w.data) + n * K;
            if (n + 1 < n1) prefetch_bytes(row + K, K * 2);
            yi[n] = kr.dot_f16(row, xi, K);
          }
          break;
        case WeightType::BF16:
          for (int64_t n = n0; n < n1; ++n) yi[n] = kr.dot_bf16(static_cast<const uint16_t*>(w.data) + n * K, xi, K);
          break;
        default: break;
      }
    }
  });
}

void CpuBackend::matmul_quantized(const QTensor& w, const PackedMatrix& p, const float* x, int64_t m, float* y) {
  quantized_matvec(*kernels_, pool_, p, x, m, rows_per_task(w), y);
}

void CpuBackend::matmul_group(const MatmulJob* jobs, int count, Act x_act, int64_t m) {
  const float* x = x_act.f32();
  if (!options_.reference && count > 0 && count <= 8) {
    const RepackedQ8* mats[8];
    float* ys[8];
    bool all = true;
    for (int j = 0; j < count && all; ++j) {
      mats[j] = repacked(*jobs[j].w);
      ys[j] = jobs[j].y.f32();
      all = mats[j] && mats[j]->cols == mats[0]->cols && mats[j]->group == mats[0]->group;
    }
    if (all) return gemm_q8(mats, ys, count, x, m);
  }
  // Fused only when every weight is packed and shares K and the group, so one quantized copy of x serves all.
  std::vector<const PackedMatrix*> packs;
  bool fuse = !options_.reference && count > 1;
  for (int j = 0; fuse && j < count; ++j) {
    const QTensor& w = *jobs[j].w;
    const bool float_type = !weight_traits(w.type).quantized;
    if (float_type) {
      fuse = false;
      break;
    }
    const PackedMatrix& p = packed(w);
    fuse = p.kind != PackedMatrix::Kind::kUnpacked && p.cols == packed(*jobs[0].w).cols &&
           p.group == packed(*jobs[0].w).group;
    packs.push_back(&p);
  }
  if (!fuse) return Backend::matmul_group(jobs, count, x_act, m);
  thread_local QuantizedRows scratch_rows;
  QuantizedRows& xq = scratch_rows;  // see matmul_quantized
  quantize_rows(x, m, packs[0]->cols, packs[0]->group, xq);
  struct Segment {
    int job;
    int64_t n0, n1;
  };
  std::vector<Segment> segments;
  for (int j = 0; j < count; ++j) {
    const int64_t step = rows_per_task(*jobs[j].w);
    for (int64_t n = 0; n < packs[size_t(j)]->rows; n += step)
      segments.push_back(Segment{j, n, std::min(packs[size_t(j)]->rows, n + step)});
  }
  pool_.parallel_for(int64_t(segments.size()), 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const Segment& seg = segments[size_t(s)];
      quantized_rows(*kernels_, *packs[size_t(seg.job)], xq, m, seg.n0, seg.n1, jobs[seg.job].y.f32());
    }
  });
}

void CpuBackend::rmsnorm(const float* x, const float* weight, int64_t rows, int64_t n, float eps, float* y) {
  // The reference path keeps the sum in order (the scalar table's), as silu_mul keeps libm's exp.
  const AttentionKernels& ak = options_.reference ? kScalarAttention : *attn_;
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      const double ss = ak.sum_squares(xr, n);
      const float inv = 1.0f / std::sqrt(float(ss / double(n)) + eps);
      for (int64_t i = 0; i < n; ++i) yr[i] = weight[i] * (xr[i] * inv);
    }
  };
  split_rows(rows, n, body);
}

void CpuBackend::rope(float* x, int64_t m, int64_t n_heads, int64_t head_dim, int64_t pos0, float theta) {
  const int64_t half = head_dim / 2;
  // The angles depend only on the positions, head_dim and theta, so q and k of every layer at one step share
  // them: computed once per step (a decode step of the 0.6B shape asked for them 56 times, 64 powf, cosf
  // and sinf each), with the same float operations, so the same bits.
  RopeTable& tab = rope_table_;
  if (tab.pos0 != pos0 || tab.m != m || tab.head_dim != head_dim || tab.theta != theta) {
    std::vector<float> inv_freq(static_cast<size_t>(half));
    tab.cs.resize(static_cast<size_t>(m * half));
    tab.sn.resize(static_cast<size_t>(m * half));
    for (int64_t i = 0; i < half; ++i) {
      inv_freq[i] = 1.0f / std::pow(theta, float(2 * i) / float(head_dim));
    }
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t i = 0; i < half; ++i) {
        const float angle = float(pos0 + r) * inv_freq[i];
        tab.cs[r * half + i] = std::cos(angle);
        tab.sn[r * half + i] = std::sin(angle);
      }
    }
    tab.pos0 = pos0, tab.m = m, tab.head_dim = head_dim, tab.theta = theta;
  }
  const float* cs = tab.cs.data();
  const float* sn = tab.sn.data();
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (r * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half], c = cs[r * half + i], s = sn[r * half + i];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void CpuBackend::attention(const float* q, const float* k_cache, const float* v_cache, int64_t pos0, int64_t m,
                           int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out) {
  const int64_t q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim, rep = n_heads / n_kv_heads;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const bool ref = options_.reference;
  const CpuKernels& kr = *kernels_;
  pool_.parallel_for(m * n_heads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / n_heads, h = t % n_heads, kvh = h / rep, len = pos0 + i + 1;
      const float* qh = q + i * q_dim + h * head_dim;
      float* scores = grown(tls_scores, len);
      float mx = -INFINITY;
      for (int64_t p = 0; p < len; ++p) {
        const float* kp = k_cache + p * kv_dim + kvh * head_dim;
        float s;
        if (ref) {
          double acc = 0.0;
          for (int64_t d = 0; d < head_dim; ++d) acc += double(qh[d]) * double(kp[d]);
          s = float(acc);
        } else {
          s = kr.dot_f32(kp, qh, head_dim);
        }
        scores[p] = s * scale;
        mx = std::max(mx, scores[p]);
      }
      float sum = 0.0f;
      for (int64_t p = 0; p < len; ++p) {
        scores[p] = std::exp(scores[p] - mx);
        sum += scores[p];
      }
      const float inv = 1.0f / sum;
      float* oh = out + i * q_dim + h * head_dim;
      std::fill(oh, oh + head_dim, 0.0f);
      for (int64_t p = 0; p < len; ++p) {
        const float w = scores[p] * inv;
        const float* vp = v_cache + p * kv_dim + kvh * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) oh[d] += w * vp[d];
      }
    }
  });
}

void CpuBackend::add_rmsnorm(Act x, Act residual, const float* weight, int64_t rows, int64_t n, float eps, Act y) {
  if (residual) add(x, residual, rows * n);
  rmsnorm(x.f32(), weight, rows, n, eps, y.f32());
}

// The same arithmetic, in the same order, as transformers' q_norm/k_norm, apply_rotary_pos_emb and cache update.
void CpuBackend::qk_norm_rope_kv(const QkRopeKv& s) {
  const int64_t qd = s.n_heads * s.head_dim, kvd = s.n_kv_heads * s.head_dim;
  if (s.pos0 < 0 || s.pos0 + s.m > s.capacity)
    throw Error("qk_norm_rope_kv: positions " + std::to_string(s.pos0) + ".." + std::to_string(s.pos0 + s.m - 1) +
                " do not fit the cache of " + std::to_string(s.capacity) + " tokens");
  float* q = s.q_out.f32();
  std::memcpy(q, s.q.f32(), sizeof(float) * size_t(s.m * qd));
  rmsnorm(q, s.q_norm, s.m * s.n_heads, s.head_dim, s.eps, q);
  rope(q, s.m, s.n_heads, s.head_dim, s.pos0, s.theta);
  const bool half = s.k_cache.type == ActType::F16;
  // An fp16 cache gets the keys rounded once, after the fp32 norm and rotation.
  float* k = half ? grown(tls_row, s.m * kvd) : s.k_cache.f32() + s.pos0 * kvd;
  std::memcpy(k, s.k.f32(), sizeof(float) * size_t(s.m * kvd));
  rmsnorm(k, s.k_norm, s.m * s.n_kv_heads, s.head_dim, s.eps, k);
  rope(k, s.m, s.n_kv_heads, s.head_dim, s.pos0, s.theta);
  if (half) {
    attn_->to_f16(k, s.m * kvd, f16(s.k_cache) + s.pos0 * kvd);
    attn_->to_f16(s.v.f32(), s.m * kvd, f16(s.v_cache) + s.pos0 * kvd);
  } else {
    std::memcpy(s.v_cache.f32() + s.pos0 * kvd, s.v.f32(), sizeof(float) * size_t(s.m * kvd));
  }
}

void CpuBackend::attention(Act q, Act k_cache, Act v_cache, int64_t capacity, int64_t pos0, int64_t m,
                           int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, Act out) {
  if (pos0 < 0 || pos0 + m > capacity)
    throw Error("attention: positions " + std::to_string(pos0) + ".." + std::to_string(pos0 + m - 1) +
                " do not fit the cache of " + std::to_string(capacity) + " tokens");
  if (k_cache.type != v_cache.type) throw Error("attention: keys and values are cached in different types");
  if (k_cache.type == ActType::F16)
    return attention_fast(q.f32(), f16(k_cache), f16(v_cache), pos0, m, n_heads, n_kv_heads, head_dim, out.f32());
  if (!options_.reference)
    return attention_fast(q.f32(), k_cache.f32(), v_cache.f32(), pos0, m, n_heads, n_kv_heads, head_dim, out.f32());
  attention(q.f32(), k_cache.f32(), v_cache.f32(), pos0, m, n_heads, n_kv_heads, head_dim, out.f32());
}

// Work items are (block of query rows, kv head, span of cached positions). An item's queries are the query
// heads that share its kv head for each of its rows (up to kAttnQueries in all), so every cached key and value
// is loaded once for all of them. A context is cut into spans only when items are too few to keep every thread
// busy (decode), and spans are never shorter than kMinSpan positions; each span's softmax is then kept
// unnormalized with its own maximum and the spans are merged.
template <typename T>
void CpuBackend::attention_fast(const float* q, const T* k_cache, const T* v_cache, int64_t pos0, int64_t m,
                                int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out) {
  if (attention_prefill(q, k_cache, v_cache, pos0, m, n_heads, n_kv_heads, head_dim, out)) return;
  constexpr int64_t kMinSpan = 256;
  const int64_t q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim, rep = n_heads / n_kv_heads;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const AttentionKernels& ak = *attn_;
  const int64_t rows_per = std::max<int64_t>(1, kAttnQueries / rep), per_item = rows_per * rep;
  const int64_t pairs = (m + rows_per - 1) / rows_per * n_kv_heads, longest = pos0 + m;
  const int64_t wanted = (4 * int64_t(threads()) + pairs - 1) / pairs;
  const int64_t spans = std::clamp<int64_t>(wanted, 1, (longest + kMinSpan - 1) / kMinSpan);
  const int64_t span_len = (longest + spans - 1) / spans;
  // Per item and query: the span's maximum score, its sum of exponentials, and the unnormalized output.
  const int64_t part_size = head_dim + 2;
  std::vector<float> parts(spans > 1 ? size_t(pairs * spans * per_item * part_size) : 0);
  auto row_of = [&](int64_t pair, int64_t j) { return pair / n_kv_heads * rows_per + j / rep; };
  auto head_of = [&](int64_t pair, int64_t j) { return pair % n_kv_heads * rep + j % rep; };
  pool_.parallel_for(pairs * spans, 1, [&](int64_t t0, int64_t t1) {
    float* qs = grown(tls_row, 2 * kAttnQueries * head_dim);
    float* acc = qs + kAttnQueries * head_dim;
    float* scores = grown(tls_scores, kAttnQueries * span_len);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pair = t / spans, span = t % spans, g = pair % n_kv_heads, p0 = span * span_len;
      const int64_t queries = std::min(per_item, (m - row_of(pair, 0)) * rep);
      const T* k = k_cache + p0 * kv_dim + g * head_dim;
      const T* v = v_cache + p0 * kv_dim + g * head_dim;
      for (int64_t j0 = 0; j0 < queries; j0 += kAttnQueries) {
        const int64_t nq = std::min(kAttnQueries, queries - j0);
        int64_t n = 0, len[kAttnQueries];
        for (int64_t j = 0; j < nq; ++j) {
          const int64_t row = row_of(pair, j0 + j);
          len[j] = std::clamp<int64_t>(pos0 + row + 1 - p0, 0, span_len);  // the row's causal part of the span
          n = std::max(n, len[j]);
          std::memcpy(qs + j * head_dim, q + row * q_dim + head_of(pair, j0 + j) * head_dim, sizeof(float) * size_t(head_dim));
        }
        float mx[kAttnQueries], sum[kAttnQueries];
        if (n > 0) {
          if constexpr (std::is_same_v<T, uint16_t>) {
            ak.scores(qs, head_dim, nq, k, kv_dim, n, head_dim, scale, scores, span_len);
          } else {
            ak.scores_f32(qs, head_dim, nq, k, kv_dim, n, head_dim, scale, scores, span_len);
          }
          for (int64_t j = 0; j < nq; ++j) {
            float* sj = scores + j * span_len;
            mx[j] = len[j] > 0 ? ak.max_of(sj, len[j]) : -INFINITY;
            sum[j] = len[j] > 0 ? ak.exp_sum(sj, len[j], mx[j]) : 0.0f;
            std::fill(sj + len[j], sj + n, 0.0f);  // positions after the row's own: no weight
          }
          std::fill(acc, acc + nq * head_dim, 0.0f);
          if constexpr (std::is_same_v<T, uint16_t>) {
            ak.accumulate(scores, span_len, nq, v, kv_dim, n, head_dim, acc, head_dim);
          } else {
            ak.accumulate_f32(scores, span_len, nq, v, kv_dim, n, head_dim, acc, head_dim);
          }
        }
        for (int64_t j = 0; j < nq; ++j) {
          const float* aj = acc + j * head_dim;
          if (spans > 1) {
            float* part = parts.data() + ((pair * spans + span) * per_item + j0 + j) * part_size;
            part[0] = len[j] > 0 ? mx[j] : -INFINITY;
            part[1] = len[j] > 0 ? sum[j] : 0.0f;
            if (len[j] > 0) std::memcpy(part + 2, aj, sizeof(float) * size_t(head_dim));
          } else {
            float* o = out + row_of(pair, j0 + j) * q_dim + head_of(pair, j0 + j) * head_dim;
            const float inv = 1.0f / sum[j];
            for (int64_t d = 0; d < head_dim; ++d) o[d] = aj[d] * inv;
          }
        }
      }
    }
  });
  if (spans == 1) return;
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t queries = std::min(per_item, (m - row_of(pair, 0)) * rep);
    for (int64_t j = 0; j < queries; ++j) {
      auto part = [&](int64_t span) { return parts.data() + ((pair * spans + span) * per_item + j) * part_size; };
      float mx = -INFINITY;
      for (int64_t c = 0; c < spans; ++c) mx = std::max(mx, part(c)[0]);
      float* o = out + row_of(pair, j) * q_dim + head_of(pair, j) * head_dim;
      std::fill(o, o + head_dim, 0.0f);
      float sum = 0.0f;
      for (int64_t c = 0; c < spans; ++c) {
        const float* pc = part(c);
        if (pc[0] == -INFINITY) continue;
        const float w = std::exp(pc[0] - mx);
        sum += w * pc[1];
        for (int64_t d = 0; d < head_dim; ++d) o[d] += w * pc[2 + d];
      }
      const float inv = 1.0f / sum;
      for (int64_t d = 0; d < head_dim; ++d) o[d] *= inv;
    }
  }
}

// A prompt's rows read every key and value of their kv head. attention_fast's items (four queries each) read
// them from L2 once per item, widen every fp16 element they load, and reduce every score across lanes: on the
// 0.6B and 30B-A3B shapes at 512 tokens those loops ran at about 0.9 TSC cycles per 16-lane FMA on the AMX Xeon
// this was measured on, where the FMA ports' peak is 0.375; these run at about 0.5 (1.25-1.3x less time for the
// whole call). Here an item is a tile of kTileQueries queries of one kv head:
// - the head's keys are first copied into blocks of 16 (block_keys, once per call) so that scores_blocked reduces
//   nothing across lanes; an fp16 cache's values are widened to fp32 beside them, an fp32 cache's read in place;
// - a block of 16 keys, or of kValueRows values, is read from L1 by every four-query group of the tile in turn;
// - a group works only up to its own causal length.
// The same bits as attention_fast on the cache, and as each row decoded alone: widening is exact, scores_blocked
// equals scores, and each output element is the same sum in the same order (accumulate_f32 resumes from what
// it stored).
template <typename T>
bool CpuBackend::attention_prefill(const float* q, const T* k_cache, const T* v_cache, int64_t pos0, int64_t m,
                                   int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* out) {
  constexpr bool kHalf = std::is_same_v<T, uint16_t>;
  // A tile's queries (16 KB at head_dim 128) and one block of keys or values share L1 (48 KB on the Xeon this
  // was measured on). The copy is made for as many kv heads at a time as fit kWidenBudget, and for one head
  // however long its context; each such pass must still give every thread two tiles, or the row path runs.
  constexpr int64_t kTileQueries = 32, kValueRows = 32, kMinRows = 16, kWidenBudget = int64_t(16) << 20;
  const AttentionKernels& ak = *attn_;
  if (!ak.scores_blocked || head_dim % kKeyBlock != 0 || m < kMinRows) return false;
  const int64_t rep = n_heads / n_kv_heads, tile_rows = std::max<int64_t>(1, kTileQueries / rep);
  const int64_t tiles = (m + tile_rows - 1) / tile_rows, tile_queries = tile_rows * rep;
  const int64_t q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim, longest = pos0 + m;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const int64_t keys_size = blocked_keys_size(longest, head_dim);
  const int64_t head_size = keys_size + (kHalf ? longest * head_dim : 0);
  const int64_t heads_per_pass = std::clamp<int64_t>(kWidenBudget / (head_size * int64_t(sizeof(float))), 1, n_kv_heads);
  if (heads_per_pass * tiles < 2 * int64_t(threads())) return false;
  const int64_t key_blocks = keys_size / (kKeyBlock * head_dim), s_stride = key_blocks * kKeyBlock;
  float* wide = grown(widened_kv_, heads_per_pass * head_size);
  for (int64_t g0 = 0; g0 < n_kv_heads; g0 += heads_per_pass) {
    const int64_t heads = std::min(heads_per_pass, n_kv_heads - g0);
    pool_.parallel_for(heads * key_blocks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t g = t / key_blocks, p = t % key_blocks * kKeyBlock, keys = std::min(kKeyBlock, longest - p);
        float* head = wide + g * head_size;
        const int64_t at = p * kv_dim + (g0 + g) * head_dim;
        if constexpr (kHalf) {
          ak.block_keys(k_cache + at, kv_dim, keys, head_dim, head + p * head_dim);
          for (int64_t r = 0; r < keys; ++r)
            ak.from_f16(v_cache + at + r * kv_dim, head_dim, head + keys_size + (p + r) * head_dim);
        } else {
          block_keys_f32(k_cache + at, kv_dim, keys, head_dim, head + p * head_dim);
        }
      }
    });
    pool_.parallel_for(heads * tiles, 1, [&](int64_t t0, int64_t t1) {
      float* qs = grown(tls_row, 2 * tile_queries * head_dim);
      float* acc = qs + tile_queries * head_dim;
      float* scores = grown(tls_scores, tile_queries * s_stride);
      std::vector<float> sum(static_cast<size_t>(tile_queries));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t g = t / tiles, row0 = t % tiles * tile_rows, rows = std::min(tile_rows, m - row0);
        const int64_t queries = rows * rep;
        const float* kt = wide + g * head_size;
        const float* v = kHalf ? kt + keys_size : reinterpret_cast<const float*>(v_cache) + (g0 + g) * head_dim;
        const int64_t v_stride = kHalf ? head_dim : kv_dim;
        // Query j is row row0 + j / rep of query head (g0 + g) * rep + j % rep; its causal length is len(j).
        auto len = [&](int64_t j) { return pos0 + row0 + j / rep + 1; };
        auto at = [&](int64_t j) { return (row0 + j / rep) * q_dim + ((g0 + g) * rep + j % rep) * head_dim; };
        for (int64_t j = 0; j < queries; ++j) std::memcpy(qs + j * head_dim, q + at(j), sizeof(float) * size_t(head_dim));
        // A group's keys: up to its last query's length.
        auto group_len = [&](int64_t j0) { return len(std::min(j0 + kAttnQueries, queries) - 1); };
        for (int64_t p = 0; p < key_blocks * kKeyBlock; p += kKeyBlock)
          for (int64_t j0 = 0; j0 < queries; j0 += kAttnQueries) {
            const int64_t n = std::min(kKeyBlock, group_len(j0) - p);
            if (n <= 0) continue;
            ak.scores_blocked(qs + j0 * head_dim, head_dim, std::min(kAttnQueries, queries - j0), kt + p * head_dim, n,
                              head_dim, scale, scores + j0 * s_stride + p, s_stride);
          }
        for (int64_t j = 0; j < queries; ++j) {
          float* sj = scores + j * s_stride;
          sum[size_t(j)] = ak.exp_sum(sj, len(j), ak.max_of(sj, len(j)));
          std::fill(sj + len(j), sj + group_len(j / kAttnQueries * kAttnQueries), 0.0f);  // no weight past the row
        }
        std::fill(acc, acc + queries * head_dim, 0.0f);
        for (int64_t p = 0; p < longest; p += kValueRows)
          for (int64_t j0 = 0; j0 < queries; j0 += kAttnQueries) {
            const int64_t n = std::min(kValueRows, group_len(j0) - p);
            if (n <= 0) continue;
            ak.accumulate_f32(scores + j0 * s_stride + p, s_stride, std::min(kAttnQueries, queries - j0),
                              v + p * v_stride, v_stride, n, head_dim, acc + j0 * head_dim, head_dim);
          }
        for (int64_t j = 0; j < queries; ++j) {
          const float inv = 1.0f / sum[size_t(j)], *aj = acc + j * head_dim;
          float* o = out + at(j);
          for (int64_t d = 0; d < head_dim; ++d) o[d] = aj[d] * inv;
        }
      }
    });
  }
  return true;
}

void CpuBackend::argmax(Act logits, int64_t m, int64_t vocab, int32_t* tokens) {
  for (int64_t i = 0; i < m; ++i) {
    const float* row = logits.f32() + i * vocab;
    // As the device's argmax: NaN never wins, a row of NaN gives -1 (Qwen3Model reports it).
    int64_t best = -1;
    for (int64_t j = 0; j < vocab; ++j)
      if (!std::isnan(row[j]) && (best < 0 || row[j] > row[best])) best = j;
    tokens[i] = int32_t(best);
  }
}

float* CpuBackend::grown(std::vector<float>& v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
  return v.data();
}

void CpuBackend::split_rows(int64_t rows, int64_t width, const std::function<void(int64_t, int64_t)>& fn) {
  if (rows * width < kSplitElements) return fn(0, rows);
  pool_.parallel_for(rows, std::max<int64_t>(1, kSplitElements / 4 / width), fn);
}

void CpuBackend::silu_mul(Act gate_act, Act up_act, int64_t n) {
  float* gate = gate_act.f32();
  const float* up = up_act.f32();
  // Counted as rows of kExpCost elements: an exp costs about that many adds, so decode's 3072 (0.6B shape) are
  // split over the pool too, where one thread did them while the others waited; each element's result is the
  // same however the work is split.
  constexpr int64_t kExpCost = 32;
  // The reference path keeps libm's exp (the scalar table's): it is the plain definition the others are checked
  // against, and the SIMD tables' exp is a polynomial.
  const AttentionKernels& ak = options_.reference ? kScalarAttention : *attn_;
  split_rows(n, kExpCost, [&](int64_t i0, int64_t i1) { ak.silu_mul(gate + i0, up + i0, i1 - i0); });
}

void CpuBackend::add(Act y_act, Act x_act, int64_t n) {
  float* y = y_act.f32();
  const float* x = x_act.f32();
  split_rows(n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] += x[i];
  });
}

}  // namespace qt::rt
