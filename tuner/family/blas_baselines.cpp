#include "tuner/family/blas_baselines.h"

#include <chrono>

#include "common/error.h"
#include "common/half.h"
#include "device/blas/blas_lt.h"
#include "device/cuda/l2_flush.h"
#include "device/plan/linear_reference.h"
#include "device/plan/run_plan.h"
#include "kernels_src/registry/registry.h"

namespace qt::tune {
namespace {

using kernels::KernelFamily;

// The problem's expectations of y alone: any other buffer it checks (the frag GEMM's split-K counters) is its
// own kernel's, and the baseline writes y only.
std::vector<kernels::Expected> y_only(std::vector<kernels::Expected> all) {
  std::erase_if(all, [](const kernels::Expected& e) { return e.buffer != "y"; });
  return all;
}

std::string summary(const blas::Baseline& b) {
  if (!b.dequant_family)
    return "cuBLASLt fp16 GEMM on fp16 weights [N][K] (the vendor baseline of " + std::string(b.problem_family) +
           " and --predequantize)";
  return std::string(b.dequant_family) + " to fp16 " + (b.layout == blas::WeightLayout::KN ? "[K][N]" : "[N][K]") +
         ", then cuBLASLt's fp16 GEMM (the dequant + cuBLAS baseline of " + b.problem_family + ")";
}

KernelFamily baseline(const blas::Baseline& b) {
  const KernelFamily& problem = kernels::find_family(b.problem_family);
  KernelFamily f;
  f.name = b.store_name;
  f.summary = summary(b);
  f.op = problem.op;
  f.weight_types = problem.weight_types;
  f.dtypes = problem.dtypes;
  f.dims = problem.dims;
  f.min_sm = 80;
  f.params = {{"rank", {0, 1, 2, 3}, 0, "cuBLASLt heuristic's candidate algorithm, best first"}};
  f.shape_constraint = [dequant = b.dequant_family](const kernels::Point&, const kernels::Shape& s) {
    if (s["M"] <= 0 || s["N"] <= 0 || s["K"] <= 0) return std::string("M, N and K must be positive");
    if (!dequant) return std::string();
    // The instance runs the dequant at its default point, so the shape must suit that point.
    const KernelFamily& dq = kernels::find_family(dequant);
    const std::string why = dq.shape_constraint ? dq.shape_constraint(dq.default_point(), dq.shape_from(s)) : "";
    return why.empty() ? why : dq.name + ": " + why;
  };
  // Its reference is the problem's output y alone: a problem of its own, shared by the baselines of one family.
  f.problem = problem.problem_name() + ":y";
  f.make_inputs = problem.make_inputs;
  f.reference = [ref = problem.reference](const kernels::Shape& s, const kernels::HostBuffers& in) {
    return y_only(ref(s, in));
  };
  f.linear_operands = problem.linear_operands;
  // The problem's shapes: the worker checks the device reference on the first before it trusts it on large ones.
  f.test_shapes = problem.test_shapes;
  f.probe_shape = problem.probe_shape;
  if (problem.linear_expected)
    f.linear_expected = [ex = problem.linear_expected](const kernels::Shape& s, const kernels::HostBuffers& in,
                                                       const kernels::LinearSums& sums) {
      return y_only(ex(s, in, sums));
    };
  f.source_hash = "cublaslt-" + std::to_string(blas::blas_lt_version());
  return f;
}

const std::vector<KernelFamily>& all() {
  static const std::vector<KernelFamily> v = [] {
    std::vector<KernelFamily> out;
    for (const blas::Baseline& b : blas::kBaselines) out.push_back(baseline(b));
    return out;
  }();
  return v;
}

// Times the baseline between two device events; the output buffer is refilled with garbage first, so an
// unwritten element fails verification as it does for our kernels.
class BlasInstance final : public ReferencedInstance {
 public:
  BlasInstance(const KernelFamily& f, const blas::Baseline& row, std::string device_kind, const kernels::Shape& shape)
      : f_(f), row_(row), kind_(std::move(device_kind)), shape_(shape) {}

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
    try {
      const int offered = lt_->algorithms(row_.layout, m, n, k);
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
    if (row_.dequant_family) {
      const KernelFamily& dq = kernels::find_family(row_.dequant_family);
      dq_ = std::make_unique<plan::PlanRun>(&device, dq, dq.default_point(), dq.shape_from(shape_), inputs());
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
    lt_->gemm_f16(w_, row_.layout, x_.ptr(), y_.ptr(), shape_["M"], shape_["N"], shape_["K"], rank_);
  }

  dev::Buffer upload(dev::Device& device, const std::string& name) {
    const auto it = inputs().find(name);
    if (it == inputs().end()) throw CandidateError(Status::RuntimeError, f_.name + ": the inputs lack '" + name + "'");
    dev::Buffer b(device, it->second.size());
    b.upload(it->second);
    return b;
  }

  const KernelFamily& f_;
  const blas::Baseline& row_;
  std::string kind_;
  kernels::Shape shape_;
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

const KernelFamily* blas_baseline_for(WeightType t, const std::string& op) {
  const blas::Baseline* b = blas::baseline_for(t, op);
  return b ? find_blas_baseline(b->store_name) : nullptr;
}

std::unique_ptr<KernelInstance> make_blas_instance(const KernelFamily& f, const std::string& device_kind,
                                                   const kernels::Shape& shape) {
  const blas::Baseline* row = blas::find_baseline(f.name);
  if (!row) throw Error("'" + f.name + "' is no cuBLASLt baseline (device/blas/blas_lt.h lists them)", kExitFailure);
  return std::make_unique<BlasInstance>(f, *row, device_kind, shape);
}

}  // namespace qt::tune
