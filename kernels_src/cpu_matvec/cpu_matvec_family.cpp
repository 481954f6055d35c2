#include "kernels_src/cpu_matvec/cpu_matvec_family.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/half.h"
#include "common/rng.h"
#include "family_source_hash.h"
#include "kernels_src/cpu_matvec/quantized_matvec.h"
#include "kernels_src/cpu_matvec/thread_pool.h"

namespace qt::kernels::cpu_matvec {
namespace {

using Role = BufferSpec::Role;
using rt::Isa;

const std::vector<std::string> kDims = {"N", "K", "G"};

// Not AVX-VNNI: its dot products are AVX2's (isa_kernels.h), so it would only time the same point twice.
std::vector<Isa> usable_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512Vnni}) {
    try {
      rt::kernels_for(i);
      out.push_back(i);
    } catch (const std::exception&) {
    }
  }
  return out;
}

int hw_threads() { return std::max(1, int(std::thread::hardware_concurrency())); }

// The weight arrays of each type as the file formats store them (models/FORMATS.md), [N][K] or [K][N].
std::vector<BufferSpec> weight_buffers(WeightType t, int64_t N, int64_t K, int64_t G) {
  switch (t) {
    case WeightType::Q8_0:
      return {{"q", DType::I8, N * K, Role::Input}, {"scales", DType::F32, N * K / G, Role::Input}};
    case WeightType::INT8_GW_SYM:
      return {{"q", DType::U8, N * K, Role::Input}, {"scales", DType::F16, K / G * N, Role::Input}};
    case WeightType::INT8_GW_ASYM:
      return {{"q", DType::U8, N * K, Role::Input},
              {"scales", DType::F16, K / G * N, Role::Input},
              {"zeros", DType::F16, K / G * N, Role::Input}};
    case WeightType::AWQ_INT4:
      return {{"qweight", DType::I32, K * N / 8, Role::Input},
              {"qzeros", DType::I32, K / G * N / 8, Role::Input},
              {"scales", DType::F16, K / G * N, Role::Input}};
    default: throw Error(std::string("cpu matvec: no family for weight type ") + weight_type_name(t), kExitFailure);
  }
}

LaunchPlan buffers_plan(WeightType t, const Shape& s) {
  LaunchPlan plan;
  plan.buffers = weight_buffers(t, s["N"], s["K"], s["G"]);
  plan.buffers.push_back({"x", DType::F32, s["K"], Role::Input});
  plan.buffers.push_back({"y", DType::F32, s["N"], Role::Output});
  return plan;
}

// A QTensor view of the weight buffers.
QTensor view(WeightType t, const Shape& s, const HostBuffers& b) {
  QTensor w;
  w.type = t;
  w.rows = s["N"];
  w.cols = s["K"];
  w.group_size = int32_t(s["G"]);
  auto ptr = [&](const char* name) { return static_cast<const void*>(b.at(name).data()); };
  if (t == WeightType::AWQ_INT4) {
    w.data = ptr("qweight");
    w.qzeros = static_cast<const int32_t*>(ptr("qzeros"));
    w.scales_f16 = static_cast<const uint16_t*>(ptr("scales"));
    return w;
  }
  w.data = ptr("q");
  if (t == WeightType::Q8_0) w.scales_f32 = static_cast<const float*>(ptr("scales"));
  else w.scales_f16 = static_cast<const uint16_t*>(ptr("scales"));
  if (t == WeightType::INT8_GW_ASYM) w.zeros_f16 = static_cast<const uint16_t*>(ptr("zeros"));
  return w;
}

template <class T, class Gen>
std::vector<uint8_t> generate(int64_t n, Gen gen) {
  std::vector<uint8_t> bytes(size_t(n) * sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    const T v = gen();
    std::memcpy(bytes.data() + size_t(i) * sizeof(T), &v, sizeof(T));
  }
  return bytes;
}

// Random weights in the ranges real checkpoints have, and activations in [-1, 1).
HostBuffers make_inputs(WeightType t, const Shape& s, uint64_t seed) {
  const int64_t N = s["N"], K = s["K"], G = s["G"];
  Rng rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(N) * 1000003u + uint64_t(K) * 7919u + uint64_t(G));
  auto f16 = [&](float lo, float hi) { return float_to_half_bits(lo + float(rng.uniform()) * (hi - lo)); };
  HostBuffers in;
  switch (t) {
    case WeightType::Q8_0:
      in["q"] = generate<int8_t>(N * K, [&] { return int8_t(int(rng.below(255)) - 127); });
      in["scales"] = generate<float>(N * K / G, [&] { return 0.02f * (0.5f + float(rng.uniform())) / 127.0f; });
      break;
    case WeightType::INT8_GW_SYM:
    case WeightType::INT8_GW_ASYM:
      in["q"] = generate<uint8_t>(N * K, [&] { return uint8_t(1 + rng.below(255)); });
      in["scales"] = generate<uint16_t>(K / G * N, [&] { return f16(1e-4f, 3e-4f); });
      if (t == WeightType::INT8_GW_ASYM) in["zeros"] = generate<uint16_t>(K / G * N, [&] { return f16(-0.01f, 0.01f); });
      break;
    case WeightType::AWQ_INT4:
      in["qweight"] = generate<int32_t>(K * N / 8, [&] { return int32_t(uint32_t(rng.next())); });
      in["qzeros"] = generate<int32_t>(K / G * N / 8, [&] { return int32_t(uint32_t(rng.next())); });
      in["scales"] = generate<uint16_t>(K / G * N, [&] { return f16(1e-3f, 3e-3f); });
      break;
    default: break;
  }
  in["x"] = generate<float>(K, [&] { return float(rng.uniform() * 2 - 1); });
  return in;
}

// The definition: weights dequantized to fp32 by models/core, sums in double.
std::vector<Expected> reference(WeightType t, const Shape& s, const HostBuffers& in) {
  const QTensor w = view(t, s, in);
  const int64_t N = w.rows, K = w.cols;
  std::vector<float> x(static_cast<size_t>(K)), row(static_cast<size_t>(K));
  std::memcpy(x.data(), in.at("x").data(), x.size() * sizeof(float));
  Expected e;
  e.buffer = std::string("y");  // not from a literal: GCC 12 at -O3 with the sanitizers misreads that copy (-Wrestrict)
  e.values.resize(size_t(N));
  double sq = 0;
  for (int64_t n = 0; n < N; ++n) {
    dequantize_row(w, n, row.data());
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += double(row[size_t(k)]) * x[size_t(k)];
    e.values[size_t(n)] = float(acc);
    sq += acc * acc;
  }
  // The fast path rounds activations to int8 per group (half a step of amax/127, about 1.2% of the RMS for
  // uniform inputs); over sqrt(K)-scaled sums and a few-sigma tail that stays under 8% of the output RMS,
  // while a wrong row, scale or zero point is off by the output's own magnitude.
  e.abs_tol = 0.08 * std::sqrt(sq / double(std::max<int64_t>(N, 1)));
  e.rel_tol = 0.02;
  return {e};
}

class MatvecKernel final : public HostKernel {
 public:
  MatvecKernel(WeightType t, const Point& p, const Shape& s, HostBuffers& b)
      : kernels_(rt::kernels_for(Isa(p.at("isa")))),
        pool_(int(p.at("threads"))),
        rows_per_task_(p.at("rows_per_task")),
        weights_(view(t, s, b)),
        packed_(rt::pack_for_cpu(weights_, &pool_)),
        x_(reinterpret_cast<const float*>(b.at("x").data())),
        y_(reinterpret_cast<float*>(b.at("y").data())) {}

  double run() override {
    const auto t0 = std::chrono::steady_clock::now();
    rt::quantized_matvec(kernels_, pool_, packed_, x_, 1, rows_per_task_, y_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  const rt::CpuKernels& kernels_;
  rt::ThreadPool pool_;
  int64_t rows_per_task_;
  QTensor weights_;
  rt::PackedMatrix packed_;
  const float* x_;
  float* y_;
};

std::string shape_check(WeightType t, const Shape& s) {
  const int64_t N = s["N"], K = s["K"], G = s["G"];
  if (N <= 0 || K <= 0 || G <= 0 || K % G != 0) return "N, K, G must be positive and K a multiple of G";
  if (N > (1 << 20) || K > (1 << 20)) return "N and K are limited to 2^20";
  if (t == WeightType::AWQ_INT4 && (N % 8 != 0 || G % 32 != 0)) return "AWQ needs N % 8 == 0 and G % 32 == 0";
  return "";
}

KernelFamily make_family(WeightType t) {
  KernelFamily f;
  f.name = matvec_family_name(t);
  f.summary = "CPU decode matvec: int8-quantized activations, one SIMD dot product per output row, threaded";
  f.op = "linear";
  f.weight_types = {t};
  f.dtypes = linear_dtypes(t, DType::F32, DType::F32);
  f.dims = kDims;
  Param isa{"isa", {}, 0, "instruction set of the dot products"};
  for (Isa i : usable_isas()) {
    isa.values.push_back(int64_t(i));
    isa.labels.push_back(rt::isa_name(i));
  }
  isa.default_value = isa.values.back();
  std::vector<int64_t> threads;
  for (int n = 1; n < hw_threads(); n *= 2) threads.push_back(n);
  threads.push_back(hw_threads());
  f.params = {isa,
              {"threads", threads, threads.back(), "threads of the pool"},
              {"rows_per_task", {1, 2, 4, 8, 16, 32, 64, 128, 256}, 16, "output rows per work item"}};
  // Work items larger than a thread's share leave threads idle by construction.
  f.shape_constraint = [t](const Point& p, const Shape& s) {
    if (std::string why = shape_check(t, s); !why.empty()) return why;
    const int64_t N = s["N"], n_threads = p.at("threads"), rpt = p.at("rows_per_task");
    if (rpt * n_threads > ((N + n_threads - 1) / n_threads) * n_threads)
      return std::string("rows_per_task * threads exceeds the rows");
    return std::string();
  };
  f.plan = [t](const Point&, const Shape& s) { return buffers_plan(t, s); };
  f.host_prepare = [t](const Point& p, const Shape& s, HostBuffers& b) -> std::unique_ptr<HostKernel> {
    try {
      rt::kernels_for(Isa(p.at("isa")));
    } catch (const std::exception& e) {
      throw PointRejected(PointRejected::Reason::ResourceFailed, e.what());
    }
    return std::make_unique<MatvecKernel>(t, p, s, b);
  };
  f.make_inputs = [t](const Shape& s, uint64_t seed) { return make_inputs(t, s, seed); };
  f.reference = [t](const Shape& s, const HostBuffers& in) { return reference(t, s, in); };
  f.model_shapes = [t](const ModelConfig&, const ModelWeights* w) {
    std::vector<Shape> out;
    if (!w) return out;
    for (const MatvecShape& m : model_matvec_shapes(*w))
      if (m.type == t) out.push_back(Shape{kDims, m.shape, m.what});
    return out;
  };
  // Every point must accept the probe: N large enough for the largest work item on every thread.
  f.probe_shape = Shape{kDims, {256 * int64_t(threads.back()), 512, 64}, "probe"};
  f.test_shapes = {Shape{kDims, {256, 512, 64}, "small"}, Shape{kDims, {96, 1024, 128}, "odd N"}};
  f.source_hash = kFamilySourceHash;
  return f;
}

}  // namespace

std::string matvec_family_name(WeightType t) { return std::string("matvec.") + weight_traits(t).short_name; }

std::vector<MatvecShape> model_matvec_shapes(const ModelWeights& w) {
  std::vector<MatvecShape> out;
  std::set<std::pair<int, std::vector<int64_t>>> seen;
  auto add = [&](const QTensor& t, const std::string& what) {
    if (t.empty()) return;
    if (t.type == WeightType::F32 || t.type == WeightType::F16 || t.type == WeightType::BF16) return;
    std::vector<int64_t> s = {t.rows, t.cols, t.group_size};
    if (seen.insert({int(t.type), s}).second) out.push_back({t.type, s, what});
  };
  for (const LayerWeights& L : w.layers) {
    add(L.wq, "attention q_proj");
    add(L.wk, "attention k_proj");
    add(L.wv, "attention v_proj");
    add(L.wo, "attention o_proj");
    add(L.w1, "mlp gate_proj");
    add(L.w2, "mlp down_proj");
    add(L.w3, "mlp up_proj");
    add(L.router, "moe router");
    add(L.expert_w1.base, "expert gate_proj");  // every expert of a stack shares the base's shape
    add(L.expert_w2.base, "expert down_proj");
    add(L.expert_w3.base, "expert up_proj");
  }
  add(w.classifier, "lm_head");
  return out;
}

const KernelFamily& q8_0_family() {
  static const KernelFamily f = make_family(WeightType::Q8_0);
  return f;
}
const KernelFamily& int8_sym_family() {
  static const KernelFamily f = make_family(WeightType::INT8_GW_SYM);
  return f;
}
const KernelFamily& int8_asym_family() {
  static const KernelFamily f = make_family(WeightType::INT8_GW_ASYM);
  return f;
}
const KernelFamily& awq_int4_family() {
  static const KernelFamily f = make_family(WeightType::AWQ_INT4);
  return f;
}

}  // namespace qt::kernels::cpu_matvec
