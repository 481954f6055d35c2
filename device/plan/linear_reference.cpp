#include "device/plan/linear_reference.h"

#include <climits>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/paths.h"

namespace qt::plan {

namespace {

constexpr int kTile = 16;
const std::string kKernel = "linear_sums_kernel<16>";

std::string read_source() {
  const std::string path = source_root() + "/kernels_src/reference/linear_sums.cuh";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the device reference kernel (set QTUNE_HOME?)", kExitFailure);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

dev::Buffer upload(dev::Device& device, const std::vector<float>& v) {
  dev::Buffer b(device, std::max<size_t>(v.size(), 1) * sizeof(float));
  if (!v.empty()) b.upload(v);
  return b;
}

// `got` within the rounding of a double sum in another order, rounded once to fp32, of `want`: one fp32 ulp of
// the sum of absolute values bounds both.
std::string compare(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                    const std::vector<float>& abs) {
  if (got.size() != want.size()) return std::string(what) + ": " + std::to_string(got.size()) + " sums, expected " +
                                        std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = std::ldexp(std::fabs(double(abs[i])), -22) + 1e-30;
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol)) {
      std::ostringstream os;
      os << what << "[" << i << "]: device " << got[i] << ", CPU " << want[i];
      return os.str();
    }
  }
  return "";
}

}  // namespace

std::shared_ptr<dev::Module> load_linear_sums_module(dev::Device& device) {
  dev::ModuleSource src;
  src.name = "reference/linear_sums";
  src.source = read_source();
  src.kernels = {kKernel};
  return device.load_module(src);  // from the device's compile cache after the first time
}

kernels::LinearSums device_linear_sums(dev::Device& device, const kernels::LinearOperands& ops) {
  const size_t m = size_t(ops.m), n = size_t(ops.n), k = size_t(ops.k);
  if (ops.m < 1 || ops.n < 1 || ops.k < 1 || ops.a.size() != m * k || ops.w.size() != k * n ||
      (!ops.g.empty() && ops.g.size() != m * k))
    throw Error("device linear reference: operand sizes do not match M, N, K", kExitFailure);
  if (ops.m > INT_MAX || ops.n > INT_MAX || ops.k > INT_MAX || ops.m / kTile >= 65535)
    throw Error("device linear reference: M, N or K beyond the kernel's indexing", kExitFailure);
  const std::shared_ptr<dev::Module> module = load_linear_sums_module(device);
  const dev::Buffer a = upload(device, ops.a), w = upload(device, ops.w), g = upload(device, ops.g);
  dev::Buffer y(device, m * n * 4), abs_y(device, m * n * 4), g_abs(device, (ops.g.empty() ? 1 : m * n) * 4);
  dev::KernelArgs args;
  args.add(a.ptr()).add(w.ptr()).add(ops.g.empty() ? dev::DevPtr{} : g.ptr());
  args.add(y.ptr()).add(abs_y.ptr()).add(ops.g.empty() ? dev::DevPtr{} : g_abs.ptr());
  args.add(int32_t(ops.m)).add(int32_t(ops.n)).add(int32_t(ops.k));
  dev::LaunchConfig cfg;
  cfg.grid = {uint32_t((n + kTile - 1) / kTile), uint32_t((m + kTile - 1) / kTile), 1};
  cfg.block = {kTile * kTile, 1, 1};
  device.launch(module->kernel(kKernel), cfg, args);
  device.synchronize();
  kernels::LinearSums s;
  s.y = y.download<float>(m * n);
  s.abs = abs_y.download<float>(m * n);
  if (!ops.g.empty()) s.g_abs = g_abs.download<float>(m * n);
  return s;
}

std::string check_device_linear_sums(dev::Device& device, const kernels::KernelFamily& family,
                                     const kernels::Shape& shape) {
  if (!family.linear_operands) return family.name + " does not describe its reference as a matrix product";
  const kernels::HostBuffers in = family.make_inputs(shape, 1);
  const kernels::LinearOperands ops = family.linear_operands(shape, in);
  const kernels::LinearSums cpu = kernels::cpu_linear_sums(ops), gpu = device_linear_sums(device, ops);
  for (const std::string& e : {compare("y", gpu.y, cpu.y, cpu.abs), compare("|a||w|", gpu.abs, cpu.abs, cpu.abs),
                               compare("g|w|", gpu.g_abs, cpu.g_abs, cpu.g_abs)})
    if (!e.empty()) return family.name + " at " + kernels::shape_key(shape) + ": " + e;
  return "";
}

}  // namespace qt::plan
