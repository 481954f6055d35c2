#include "tuner/family/blas_baselines.h"

#include <chrono>

#include "common/error.h"
#include "common/half.h"
#include "device/blas/blas_lt.h"
#include "device/cuda/l2_flush.h"
#include "device/plan/linear_reference.h"
#include "device/plan/run_plan.h"
#include "kernels_src/awq/awq_family.h"
#include "kernels_src/f16_gemm/f16_gemm_family.h"

namespace qt::tune {
namespace {

using kernels::KernelFamily;

KernelFamily baseline(const std::string& name, const KernelFamily& problem, const std::string& summary) {
  KernelFamily f;
  f.name = name;
  f.summary = summary;
  f.op = problem.op;
  f.weight_types = problem.weight_types;
  f.dtypes = problem.dtypes;
  f.dims = problem.dims;
  f.min_sm = 80;
  f.params = {{"rank", {0, 1, 2, 3}, 0, "cuBLASLt heuristic's candidate algorithm, best first"}};
  f.shape_constraint = [](const kernels::Point&, const kernels::Shape& s) {
    return s["M"] > 0 && s["N"] > 0 && s["K"] > 0 ? std::string() : std::string("M, N and K must be positive");
  };
  f.make_inputs = problem.make_inputs;
  f.reference = problem.reference;
  f.linear_operands = problem.linear_operands;
  f.linear_expected = problem.linear_expected;
  f.source_hash = "cublaslt-" + std::to_string(blas::blas_lt_version());
  return f;
}

const std::vector<KernelFamily>& all() {
  static const std::vector<KernelFamily> v = {
      baseline(kCublasF16, kernels::f16_gemm::gemm_family(),
               "cuBLASLt fp16 GEMM on fp16 weights [N][K] (the vendor baseline of f16_gemm and --predequantize)"),
      baseline(kAwqDequantCublas, kernels::awq::gemm_family(),
               "awq_dequant to fp16 [K][N], then cuBLASLt's fp16 GEMM (the dequant + cuBLAS baseline of awq_gemm)")};
  return v;
}

// Times the baseline between two device events; the output buffer is refilled with garbage first, so an
// unwritten element fails verification as it does for our kernels.
class BlasInstance final : public ReferencedInstance {
 public:
  BlasInstance(const KernelFamily& f, std::string device_kind, const kernels::Shape& shape)
      : f_(f), kind_(std::move(device_kind)), shape_(shape), dequant_(f.name == kAwqDequantCublas) {}

  SetupCosts setup() override {
    SetupCosts c;
    const auto t0 = std::chrono::steady_clock::now();
    dev::Device& device = worker_device(kind_);
    plan::load_linear_sums_module(device);  // the context's first module load
    c.device = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    make_reference(f_, shape_, kind_ == "cuda" ? &device : nullptr, c);
    return c;
  }

  void prepare(const nlohmann::json& point) override {
    dev::Device& device = worker_device(kind_);
    try {
      if (!lt_) lt_ = std::make_unique<blas::BlasLt>(device);
    } catch (const Error& e) {
      throw CandidateError(Status::RuntimeError, e.what());
    }
    rank_ = point.value("rank", 0);
    const int64_t m = shape_["M"], n = shape_["N"], k = shape_["K"];
    const blas::WeightLayout layout = dequant_ ? blas::WeightLayout::KN : blas::WeightLayout::NK;
    try {
      const int offered = lt_->algorithms(layout, m, n, k);
      if (rank_ >= offered)
        throw CandidateError(Status::Invalid, "cuBLASLt offers " + std::to_string(offered) + " algorithms for this GEMM");
    } catch (const CandidateError&) {
      throw;
    } catch (const std::exception& e) {
      throw CandidateError(Status::RuntimeError, e.what());
    }
    if (x_.bytes()) return;  // inputs are uploaded once per instance
    x_ = upload(device, "x");
    y_ = dev::Buffer(device, size_t(m * n) * 2);
    if (dequant_) {
      const KernelFamily& dq = kernels::awq::dequant_family();
      dq_ = std::make_unique<plan::PlanRun>(&device, dq, dq.default_point(), dq.shape(shape_.values), inputs_);
      w_ = dq_->buffer("w");
    } else {
      values_ = upload(device, "values");
      w_ = values_.ptr();
    }
  }

  void run() override {
    try {
      worker_device(kind_).memset(y_.ptr(), 0xFF, y_.bytes());
      enqueue();
    } catch (const std::exception& e) {
      throw CandidateError(Status::RuntimeError, e.what());
    }
    const std::vector<uint16_t> y = y_.download<uint16_t>(size_t(shape_["M"] * shape_["N"]));
    out_.assign(y.size(), 0);
    for (size_t i = 0; i < y.size(); ++i) out_[i] = half_bits_to_float(y[i]);
  }

  double time() override {
    dev::Device& device = worker_device(kind_);
    try {
      const auto start = device.record_event();
      enqueue();
      const auto end = device.record_event();
      return device.seconds_between(*start, *end);
    } catch (const std::exception& e) {
      throw CandidateError(Status::RuntimeError, e.what());
    }
  }

  bool flush_device_cache() override { return flusher_.flush(worker_device(kind_)); }

 private:
  void enqueue() {
    if (dq_) dq_->enqueue();
    lt_->gemm_f16(w_, dq_ ? blas::WeightLayout::KN : blas::WeightLayout::NK, x_.ptr(), y_.ptr(), shape_["M"],
                  shape_["N"], shape_["K"], rank_);
  }

  dev::Buffer upload(dev::Device& device, const std::string& name) {
    const auto it = inputs_.find(name);
    if (it == inputs_.end()) throw CandidateError(Status::RuntimeError, f_.name + ": the inputs lack '" + name + "'");
    dev::Buffer b(device, it->second.size());
    b.upload(it->second);
    return b;
  }

  const KernelFamily& f_;
  std::string kind_;
  kernels::Shape shape_;
  bool dequant_;
  std::unique_ptr<blas::BlasLt> lt_;
  std::unique_ptr<plan::PlanRun> dq_;
  dev::Buffer x_, y_, values_;
  cuda::L2Flusher flusher_;
  dev::DevPtr w_;
  int rank_ = 0;
};

}  // namespace

std::vector<const KernelFamily*> blas_baselines() {
  std::vector<const KernelFamily*> v;
  for (const KernelFamily& f : all()) v.push_back(&f);
  return v;
}

const KernelFamily* find_blas_baseline(const std::string& name) {
  for (const KernelFamily& f : all())
    if (f.name == name) return &f;
  return nullptr;
}

bool is_blas_baseline(const KernelFamily& f) { return find_blas_baseline(f.name) == &f; }

const KernelFamily* blas_baseline_for(WeightType t) {
  if (t == WeightType::F16) return find_blas_baseline(kCublasF16);
  if (t == WeightType::AWQ_INT4) return find_blas_baseline(kAwqDequantCublas);
  return nullptr;
}

std::unique_ptr<KernelInstance> make_blas_instance(const KernelFamily& f, const std::string& device_kind,
                                                   const kernels::Shape& shape) {
  return std::make_unique<BlasInstance>(f, device_kind, shape);
}

}  // namespace qt::tune
