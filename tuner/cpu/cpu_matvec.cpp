#include "tuner/cpu/cpu_matvec.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/half.h"
#include "runtime/cpu/cpu_backend.h"
#include "tuner/core/rng.h"
#include "tuner/measure/flush.h"
#include "tuner/store/store.h"

#ifndef QTUNE_VERSION
#define QTUNE_VERSION "0"
#endif

namespace qt::tune {

namespace {

std::vector<rt::Isa> usable_isas() {
  std::vector<rt::Isa> out;
  for (rt::Isa i : {rt::Isa::kScalar, rt::Isa::kAvx2, rt::Isa::kAvx512Vnni}) {
    try {
      rt::kernels_for(i);
      out.push_back(i);
    } catch (const std::exception&) {
    }
  }
  return out;
}

int hw_threads() { return std::max(1, int(std::thread::hardware_concurrency())); }

// Random quantized weights of one type, owned storage plus the QTensor view.
struct Weights {
  std::vector<int8_t> i8;
  std::vector<uint8_t> u8;
  std::vector<int32_t> i32, qz;
  std::vector<float> f32s;
  std::vector<uint16_t> f16s, f16z;
  QTensor t;
};

void fill_weights(Weights& w, WeightType type, int64_t N, int64_t K, int64_t G, Rng& rng) {
  w.t.type = type;
  w.t.rows = N;
  w.t.cols = K;
  w.t.group_size = int32_t(G);
  auto f16 = [&](float lo, float hi) { return float_to_half_bits(lo + float(rng.uniform()) * (hi - lo)); };
  switch (type) {
    case WeightType::Q8_0:
      w.i8.resize(size_t(N * K));
      for (auto& q : w.i8) q = int8_t(int(rng.below(255)) - 127);
      w.f32s.resize(size_t(N * K / G));
      for (auto& s : w.f32s) s = 0.02f * (0.5f + float(rng.uniform())) / 127.0f;
      w.t.data = w.i8.data();
      w.t.scales_f32 = w.f32s.data();
      break;
    case WeightType::INT8_GW_SYM:
    case WeightType::INT8_GW_ASYM:
      w.u8.resize(size_t(N * K));
      for (auto& q : w.u8) q = uint8_t(1 + rng.below(255));
      w.f16s.resize(size_t(K / G * N));
      for (auto& s : w.f16s) s = f16(1e-4f, 3e-4f);
      w.t.data = w.u8.data();
      w.t.scales_f16 = w.f16s.data();
      if (type == WeightType::INT8_GW_ASYM) {
        w.f16z.resize(w.f16s.size());
        for (auto& z : w.f16z) z = f16(-0.01f, 0.01f);
        w.t.zeros_f16 = w.f16z.data();
      }
      break;
    case WeightType::AWQ_INT4:
      w.i32.resize(size_t(K * N / 8));
      for (auto& q : w.i32) q = int32_t(uint32_t(rng.next()));
      w.qz.resize(size_t(K / G * N / 8));
      for (auto& z : w.qz) z = int32_t(uint32_t(rng.next()));
      w.f16s.resize(size_t(K / G * N));
      for (auto& s : w.f16s) s = f16(1e-3f, 3e-3f);
      w.t.data = w.i32.data();
      w.t.qzeros = w.qz.data();
      w.t.scales_f16 = w.f16s.data();
      break;
    default: throw Error("cpu matvec: unsupported weight type");
  }
}

class MatvecInstance : public KernelInstance {
 public:
  MatvecInstance(WeightType type, const std::vector<int64_t>& shape) {
    int64_t N = shape.at(0), K = shape.at(1), G = shape.at(2);
    Rng rng(uint64_t(N) * 1000003u + uint64_t(K) * 7919u + uint64_t(G));
    fill_weights(w_, type, N, K, G, rng);
    x_.resize(size_t(K));
    for (auto& v : x_) v = float(rng.uniform() * 2 - 1);
    y_.assign(size_t(N), 0.f);
  }

  void prepare(const nlohmann::json& point) override {
    rt::CpuOptions o;
    o.threads = point.at("threads").get<int>();
    o.rows_per_task = point.at("rows_per_task").get<int64_t>();
    std::string isa = point.at("isa").get<std::string>();
    bool found = false;
    for (rt::Isa i : usable_isas())
      if (isa == rt::isa_name(i)) o.isa = i, found = true;
    if (!found) throw CandidateError(Status::ResourceFailed, "instruction set " + isa + " not available on this CPU");
    backend_ = std::make_unique<rt::CpuBackend>(o);
  }

  double run() override {
    auto t0 = std::chrono::steady_clock::now();
    backend_->matmul(w_.t, x_.data(), 1, y_.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  const float* output() const override { return y_.data(); }

  const std::vector<float>& reference() override {
    if (ref_.empty()) {
      rt::CpuOptions o;
      o.reference = true;
      rt::CpuBackend ref(o);
      ref_.assign(y_.size(), 0.f);
      ref.matmul(w_.t, x_.data(), 1, ref_.data());
    }
    return ref_;
  }

  // The fast path rounds activations to int8 per group (half a step of amax/127, about 1.2% of the RMS
  // for uniform inputs); over sqrt(K)-scaled sums and a few-sigma tail that stays under 8% of the output
  // RMS, while a wrong row, scale or zero point is off by the output's own magnitude.
  Tolerance tolerance(double ref_rms) const override { return {0.08 * ref_rms, 0.02}; }

 private:
  Weights w_;
  std::vector<float> x_, y_, ref_;
  std::unique_ptr<rt::CpuBackend> backend_;
};

class MatvecFamily : public KernelFamily {
 public:
  explicit MatvecFamily(WeightType t) : type_(t) {}
  std::string name() const override { return cpu_matvec_family_name(type_); }
  std::string dtypes() const override { return std::string(weight_traits(type_).short_name) + "xf32->f32"; }
  std::string source_hash() const override { return std::string("runtime-cpu-") + QTUNE_VERSION; }

  std::vector<Param> params(const std::vector<int64_t>&) const override {
    Param isa;
    isa.name = "isa";
    for (rt::Isa i : usable_isas()) {
      isa.text.push_back(std::string("\"") + rt::isa_name(i) + "\"");
      isa.numeric.push_back(double(int(i)));
    }
    std::vector<double> threads;
    for (int t = 1; t < hw_threads(); t *= 2) threads.push_back(t);
    threads.push_back(hw_threads());
    return {isa, numeric_param("threads", threads),
            numeric_param("rows_per_task", {1, 2, 4, 8, 16, 32, 64, 128, 256})};
  }

  bool valid(const std::vector<int64_t>& shape, const std::vector<double>& v) const override {
    int64_t N = shape.at(0);
    int64_t threads = int64_t(v[1]), rpt = int64_t(v[2]);
    return rpt * threads <= ((N + threads - 1) / threads) * threads;
  }

  std::unique_ptr<KernelInstance> instantiate(const std::vector<int64_t>& shape) const override {
    if (shape.size() != 3) throw Error(name() + ": shape must be [N, K, G]");
    int64_t N = shape[0], K = shape[1], G = shape[2];
    if (N <= 0 || K <= 0 || G <= 0 || K % G != 0 || N > (1 << 20) || K > (1 << 20))
      throw Error(name() + ": invalid shape");
    if (type_ == WeightType::AWQ_INT4 && (N % 8 != 0 || G % 32 != 0))
      throw Error(name() + ": AWQ needs N % 8 == 0 and G % 32 == 0");
    return std::make_unique<MatvecInstance>(type_, shape);
  }

  size_t flush_bytes() const override { return 2 * cpu_last_level_cache_bytes(); }

 private:
  WeightType type_;
};

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "unknown cpu";
}

}  // namespace

std::string cpu_matvec_family_name(WeightType t) { return std::string("cpu.matvec.") + weight_traits(t).short_name; }

void register_cpu_families() {
  for (WeightType t : {WeightType::Q8_0, WeightType::INT8_GW_SYM, WeightType::INT8_GW_ASYM, WeightType::AWQ_INT4})
    register_family(std::make_shared<MatvecFamily>(t));
}

std::vector<MatvecShape> model_matvec_shapes(const ModelWeights& w) {
  std::vector<MatvecShape> out;
  std::set<std::pair<int, std::vector<int64_t>>> seen;
  auto add = [&](const QTensor& t, const std::string& what) {
    if (t.empty()) return;
    if (!weight_traits(t.type).quantized) return;
    std::vector<int64_t> s = {t.rows, t.cols, t.group_size};
    if (seen.insert({int(t.type), s}).second) out.push_back({t.type, s, what});
  };
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    add(L.wq, "attention q_proj");
    add(L.wk, "attention k_proj");
    add(L.wv, "attention v_proj");
    add(L.wo, "attention o_proj");
    add(L.w1, "mlp gate_proj");
    add(L.w2, "mlp down_proj");
    add(L.w3, "mlp up_proj");
    add(L.router, "moe router");
    for (const auto& e : L.expert_w1) add(e, "expert gate_proj");
    for (const auto& e : L.expert_w2) add(e, "expert down_proj");
    for (const auto& e : L.expert_w3) add(e, "expert up_proj");
  }
  add(w.classifier, "lm_head");
  return out;
}

DeviceFingerprint cpu_fingerprint() {
  DeviceFingerprint d;
  d.name = "cpu: " + cpu_model_name();
  std::string isa = "x86_64";
  auto isas = usable_isas();
  if (!isas.empty()) isa += std::string("-") + rt::isa_name(isas.back());
  d.arch = isa;
  d.sm_count = hw_threads();
  struct sysinfo si{};
  if (sysinfo(&si) == 0) d.memory_bytes = uint64_t(si.totalram) * si.mem_unit;
  d.l2_bytes = cpu_last_level_cache_bytes(0);
  d.qtune_version = QTUNE_VERSION;
  return d;
}

}  // namespace qt::tune
