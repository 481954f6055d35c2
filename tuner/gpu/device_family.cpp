#include "tuner/gpu/device_family.h"

#include <chrono>
#include <cstring>
#include <map>
#include <memory>

#include "common/error.h"
#include "common/half.h"
#include "kernels_src/registry/registry.h"
#include "device/emu/emu_device.h"
#include "device/jit/compile_service.h"
#include "device/jit/nvrtc_compiler.h"
#include "common/sha256.h"
#include "tuner/family/family.h"

namespace qt::tune {

namespace {

kernels::ProblemShape to_problem(const std::vector<int64_t>& s) {
  if (s.size() != 4) throw Error("GPU family shapes are [M, N, K, G]");
  kernels::ProblemShape p;
  p.m = s[0];
  p.n = s[1];
  p.k = s[2];
  p.group = s[3];
  return p;
}

kernels::Point to_point(const kernels::KernelFamily& f, const nlohmann::json& j) {
  kernels::Point p;
  for (const auto& [k, v] : j.items()) p[k] = v.get<int64_t>();
  kernels::validate_point(f, p);
  return p;
}

// One emulator per worker process, created on first use (after the fork).
dev::Device& worker_device() {
  static std::unique_ptr<dev::Device> device = std::make_unique<emu::EmuDevice>();
  return *device;
}

class DeviceInstance : public KernelInstance {
 public:
  DeviceInstance(const kernels::KernelFamily& f, const kernels::ProblemShape& s, int target_sm)
      : f_(f), shape_(s), target_sm_(target_sm) {
    inputs_ = f.make_inputs(s, 1);
    expected_ = f.reference(s, inputs_);
    for (const auto& e : expected_) ref_.insert(ref_.end(), e.values.begin(), e.values.end());
  }

  void prepare(const nlohmann::json& point) override {
    kernels::Point p = to_point(f_, point);
    if (f_.point_constraint) {
      std::string why = f_.point_constraint(p);
      if (!why.empty()) throw CandidateError(Status::Invalid, why);
    }
    if (f_.shape_constraint) {
      std::string why = f_.shape_constraint(p, shape_);
      if (!why.empty()) throw CandidateError(Status::Invalid, why);
    }
    if (target_sm_ > 0) prune_statically(p);
    dev::Device& d = worker_device();
    dev::ModuleSource src;
    src.name = f_.name;
    src.source = kernels::read_family_source(f_);
    src.kernels = f_.kernels(p);
    try {
      module_ = d.load_module(src);
    } catch (const std::exception& e) {
      throw CandidateError(Status::CompileFailed, e.what());
    }
    plan_ = f_.plan(p, shape_);
    buffers_.clear();
    for (const auto& b : plan_.buffers) {
      dev::Buffer buf(d, size_t(b.bytes()));
      if (b.role == kernels::BufferSpec::Role::Input) {
        auto it = inputs_.find(b.name);
        if (it == inputs_.end() || it->second.size() != size_t(b.bytes()))
          throw CandidateError(Status::RuntimeError, "family " + f_.name + " has no input data for " + b.name);
        d.copy_to_device(buf.ptr(), it->second.data(), it->second.size());
      }
      buffers_.emplace(b.name, std::move(buf));
    }
  }

  double run() override {
    dev::Device& d = worker_device();
    for (const auto& b : plan_.buffers)
      // NaN garbage, as verify_point uses: an output element the kernel never writes cannot pass as a zero.
      if (b.role != kernels::BufferSpec::Role::Input) d.memset(buffers_.at(b.name).ptr(), 0xFF, size_t(b.bytes()));
    auto t0 = std::chrono::steady_clock::now();
    try {
      for (const auto& l : plan_.launches) {
        dev::Kernel k = module_->kernel(l.kernel);
        dev::LaunchConfig cfg;
        cfg.grid = {l.grid.x, l.grid.y, l.grid.z};
        cfg.block = {l.block.x, l.block.y, l.block.z};
        cfg.dynamic_smem_bytes = uint32_t(l.dynamic_smem);
        dev::KernelArgs args;
        for (const auto& a : l.args) {
          if (a.kind == kernels::KernelArg::Kind::Buffer) args.add(buffers_.at(a.buffer).ptr());
          else args.add(a.value);
        }
        d.launch(k, cfg, args);
      }
      d.synchronize();
    } catch (const CandidateError&) {
      throw;
    } catch (const std::exception& e) {
      throw CandidateError(Status::RuntimeError, e.what());
    }
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out_.clear();
    for (const auto& e : expected_) {
      const kernels::BufferSpec& spec = plan_.buffer(e.buffer);
      std::vector<uint8_t> raw(size_t(spec.bytes()));
      d.copy_to_host(raw.data(), buffers_.at(e.buffer).ptr(), raw.size());
      for (int64_t i = 0; i < spec.elements && size_t(i) < e.values.size(); ++i) {
        float v = 0;
        if (spec.dtype == kernels::DType::F16) {
          uint16_t h;
          std::memcpy(&h, raw.data() + 2 * i, 2);
          v = half_bits_to_float(h);
        } else if (spec.dtype == kernels::DType::F32) {
          std::memcpy(&v, raw.data() + 4 * i, 4);
        } else {
          int32_t x;
          std::memcpy(&x, raw.data() + 4 * i, 4);
          v = float(x);
        }
        out_.push_back(v);
      }
    }
    if (out_.size() != ref_.size()) throw CandidateError(Status::RuntimeError, "output size differs from reference");
    return t;
  }

  const float* output() const override { return out_.data(); }
  const std::vector<float>& reference() override { return ref_; }

  // Static screening on the target GPU: the compile service's ptxas report decides before any run.
  void prune_statically(const kernels::Point& p) {
    static compile::CompileService service;
    std::vector<compile::PointResult> r;
    try {
      r = service.compile(f_, {p}, target_sm_);
    } catch (const std::exception& e) {
      throw CandidateError(Status::CompileFailed, std::string("sm_") + std::to_string(target_sm_) + ": " + e.what());
    }
    if (r.empty()) throw CandidateError(Status::CompileFailed, "the compile service returned nothing");
    if (!r[0].ok()) throw CandidateError(Status::CompileFailed, "sm_" + std::to_string(target_sm_) + ": " + r[0].error);
    if (!r[0].pruned.empty())
      throw CandidateError(Status::ResourceFailed, "pruned on sm_" + std::to_string(target_sm_) + ": " + r[0].pruned);
  }

  // The family states its tolerance with its reference (fp16 outputs, fp32 accumulation).
  Tolerance tolerance(double) const override {
    if (expected_.empty()) return {};
    return {expected_[0].abs_tol, expected_[0].rel_tol};
  }

 private:
  const kernels::KernelFamily& f_;
  kernels::ProblemShape shape_;
  int target_sm_ = 0;
  kernels::HostBuffers inputs_;
  std::vector<kernels::Expected> expected_;
  std::vector<float> ref_, out_;
  std::shared_ptr<dev::Module> module_;
  kernels::LaunchPlan plan_;
  std::map<std::string, dev::Buffer> buffers_;
};

class EmuFamily : public KernelFamily {
 public:
  EmuFamily(const kernels::KernelFamily& f, int target_sm) : f_(f), target_sm_(target_sm) {}
  std::string name() const override { return "emu." + f_.name; }
  std::string dtypes() const override { return "awq_int4xf16->f16"; }
  // Stored results must go stale when any header the kernels include changes, not only the family's own
  // file, and the key must not depend on the standard library's std::hash.
  std::string source_hash() const override {
    compile::Sha256 h;
    const std::string source = kernels::read_family_source(f_);
    h.field(source);
    for (const auto& [path, text] : compile::local_includes(source)) h.field(path).field(text);
    return h.hex();
  }
  std::vector<Param> params(const std::vector<int64_t>&) const override {
    std::vector<Param> out;
    for (const auto& p : f_.params) {
      std::vector<double> v(p.values.begin(), p.values.end());
      out.push_back(numeric_param(p.name, v));
    }
    return out;
  }
  bool valid(const std::vector<int64_t>& shape, const std::vector<double>& values) const override {
    kernels::Point p;
    for (size_t i = 0; i < f_.params.size(); ++i) p[f_.params[i].name] = int64_t(values[i]);
    if (f_.point_constraint && !f_.point_constraint(p).empty()) return false;
    return !f_.shape_constraint || f_.shape_constraint(p, to_problem(shape)).empty();
  }
  std::unique_ptr<KernelInstance> instantiate(const std::vector<int64_t>& shape) const override {
    return std::make_unique<DeviceInstance>(f_, to_problem(shape), target_sm_);
  }

 private:
  const kernels::KernelFamily& f_;
  int target_sm_;
};

}  // namespace

void register_emu_families(int target_sm) {
  for (const kernels::KernelFamily* f : kernels::all_families())
    register_family(std::make_shared<EmuFamily>(*f, target_sm));
}

std::vector<std::string> emu_family_names() {
  std::vector<std::string> out;
  for (const kernels::KernelFamily* f : kernels::all_families()) out.push_back("emu." + f->name);
  return out;
}

std::vector<std::vector<int64_t>> emu_model_shapes(const std::string& name, const ModelConfig& config) {
  const kernels::KernelFamily& f = kernels::find_family(name);
  std::vector<std::vector<int64_t>> out;
  if (!f.model_shapes) return out;
  for (const auto& s : f.model_shapes(config)) out.push_back({s.m, s.n, s.k, s.group});
  return out;
}

}  // namespace qt::tune
