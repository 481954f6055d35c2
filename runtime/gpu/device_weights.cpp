#include "runtime/gpu/device_weights.h"

#include <climits>

#include "common/error.h"
#include "common/half.h"
#include "device/plan/run_plan.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/fraglinear/frag_layout.h"
#include "kernels_src/moe/moe_reference.h"

namespace qt::rt {

dev::DevPtr DeviceWeights::upload(const void* data, size_t bytes) {
  dev::Buffer b(device_, bytes);
  device_.copy_to_device(b.ptr(), data, bytes);
  const dev::DevPtr p = b.ptr();
  buffers_.push_back(std::move(b));
  bytes_ += bytes;
  return p;
}

namespace {

// The frag layout's bits for `t`, or 0 when it cannot hold it (another type, or a group the frag linear
// families do not serve).
int frag_bits(const QTensor& t) {
  if (!kernels::frag::frag_layout_holds(t.type)) return 0;
  const kernels::frag::FragDims d{t.rows, t.cols, t.group_size, t.type == WeightType::AWQ_INT4 ? 4 : 8};
  if (!kernels::frag::frag_dims_check(d).empty() || d.group % 32 || d.weight_words() > INT32_MAX) return 0;
  return d.bits;
}

bool frag_stored(const QTensor& t, DeviceWeights::Storage storage) {
  return storage == DeviceWeights::Storage::kFrag && frag_bits(t);
}

// fp16 "values" on the device: the float types the families do not take, and quantized weights kept as fp16.
bool f16_stored(const QTensor& t, DeviceWeights::Storage storage) {
  return t.type == WeightType::F32 || t.type == WeightType::BF16 ||
         (storage == DeviceWeights::Storage::kF16 && weight_traits(t.type).quantized);
}

uint64_t file_layout_bytes(const QTensor& t) {
  uint64_t bytes = 0;
  for (const ArraySpec& spec : weight_traits(t.type).array_specs()) bytes += t.array_bytes(spec);
  return bytes;
}

}  // namespace

uint64_t DeviceWeights::bytes_for(const QTensor& t, Storage storage) {
  if (t.empty()) return 0;
  // The frag layout holds the file's codes, scales and zeros in another order: the same bytes.
  if (!frag_stored(t, storage) && f16_stored(t, storage)) return uint64_t(t.rows * t.cols) * 2;
  return file_layout_bytes(t);
}

uint64_t DeviceWeights::stack_bytes(const ExpertStack& s) {
  return s.empty() ? 0 : file_layout_bytes(s.base) * uint64_t(s.experts);
}

dev::DevPtr DeviceWeights::allocate(size_t bytes) {
  dev::Buffer b(device_, bytes);
  const dev::DevPtr p = b.ptr();
  buffers_.push_back(std::move(b));
  bytes_ += bytes;
  return p;
}

// The file-layout arrays go up to temporary buffers, the repack family writes the frag arrays, and the
// temporaries are freed once it has run.
void DeviceWeights::add_frag(const QTensor& t, DeviceTensor& d) {
  const kernels::KernelFamily& f =
      frag_bits(t) == 4 ? kernels::frag::awq_repack_family() : kernels::frag::int8_repack_family();
  const kernels::Shape shape{{"N", "K", "G"}, {t.rows, t.cols, t.group_size}, "repack"};
  const kernels::Point point = f.default_point();
  const kernels::LaunchPlan plan = f.plan(point, shape);
  std::vector<dev::Buffer> sources;
  std::map<std::string, dev::DevPtr> ptrs;
  for (const kernels::BufferSpec& spec : plan.buffers) {
    if (spec.role == kernels::BufferSpec::Role::Input) {
      const void* src = nullptr;
      for (const ArraySpec& a : weight_traits(t.type).array_specs())
        if (spec.name == weight_array_name(a.array)) {
          if (int64_t(t.array_bytes(a)) != spec.bytes())
            throw Error(f.name + ": array '" + spec.name + "' holds " + std::to_string(t.array_bytes(a)) +
                            " bytes, the repack expects " + std::to_string(spec.bytes()),
                        kExitFailure);
          src = t.array(a.array);
        }
      if (!src) throw Error(f.name + ": the weight lacks its '" + spec.name + "' array", kExitFailure);
      sources.emplace_back(device_, size_t(spec.bytes()));
      device_.copy_to_device(sources.back().ptr(), src, size_t(spec.bytes()));
      ptrs[spec.name] = sources.back().ptr();
    } else {
      ptrs[spec.name] = allocate(size_t(spec.bytes()));
      d.arrays[spec.name] = {ptrs[spec.name], spec.bytes()};
    }
  }
  auto& module = repack_modules_[f.name];
  if (!module) module = plan::load_family_module(device_, f, {point});
  for (const kernels::Launch& l : plan.launches)
    device_.launch(module->kernel(l.kernel), plan::launch_config(l), plan::launch_args(f, l, ptrs));
  device_.synchronize();
}

void DeviceWeights::add(const QTensor& t, Storage storage) {
  if (t.empty() || tensors_.count(t.data)) return;
  DeviceTensor d;
  d.rows = t.rows, d.cols = t.cols;
  if (frag_stored(t, storage)) {
    d.type = t.type;
    d.group = t.group_size;
    add_frag(t, d);
  } else if (f16_stored(t, storage)) {
    std::vector<uint16_t> h(size_t(t.rows * t.cols));
    std::vector<float> row(size_t(t.cols));
    for (int64_t r = 0; r < t.rows; ++r) {
      dequantize_row(t, r, row.data());
      for (int64_t c = 0; c < t.cols; ++c) h[size_t(r * t.cols + c)] = float_to_half_bits(row[size_t(c)]);
    }
    d.type = WeightType::F16;
    d.group = t.cols;
    d.arrays["values"] = {upload(h.data(), h.size() * 2), int64_t(h.size() * 2)};
  } else {
    d.type = t.type;
    d.group = t.group_size > 0 ? t.group_size : t.cols;
    for (const ArraySpec& spec : weight_traits(t.type).array_specs()) {
      const uint64_t bytes = t.array_bytes(spec);
      const void* src = t.array(spec.array);
      if (!src) throw Error(std::string("weight of type ") + weight_type_name(t.type) + " lacks its '" +
                            weight_array_name(spec.array) + "' array", kExitFailure);
      d.arrays[weight_array_name(spec.array)] = {upload(src, bytes), int64_t(bytes)};
    }
  }
  tensors_.emplace(t.data, std::move(d));
}

void DeviceWeights::add_stack(const ExpertStack& s, bool trtllm) {
  if (s.empty() || tensors_.count(s.base.data)) return;
  const QTensor& t = s.base;
  if (!weight_traits(t.type).quantized)
    throw Error(std::string("device backend: MoE experts of type ") + weight_type_name(t.type) +
                    " are not served (moe3 experts are q8_0, int8-sym, int8-asym or awq)",
                kExitUnavailable);
  const bool relayout = trtllm && (t.type == WeightType::INT8_GW_SYM || t.type == WeightType::INT8_GW_ASYM);
  DeviceTensor d;
  d.type = t.type, d.rows = t.rows, d.cols = t.cols, d.experts = s.experts;
  d.group = t.group_size > 0 ? t.group_size : t.cols;
  const auto specs = weight_traits(t.type).array_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t per = t.array_bytes(specs[i]);
    std::vector<uint8_t> block(per * uint64_t(s.experts));
    for (int64_t e = 0; e < s.experts; ++e) {
      const auto* src = static_cast<const uint8_t*>(s.expert(e).array(specs[i].array));
      if (relayout && specs[i].array == WeightArray::Q) {
        const auto l = kernels::moe::trtllm_int8_layout(src, t.cols, t.rows);
        std::copy(l.begin(), l.end(), block.begin() + int64_t(per) * e);
      } else {
        std::copy(src, src + per, block.begin() + int64_t(per) * e);
      }
    }
    d.arrays[weight_array_name(specs[i].array)] = {upload(block.data(), block.size()), int64_t(block.size())};
  }
  tensors_.emplace(t.data, std::move(d));
}

void DeviceWeights::add_vector(const std::vector<float>& v) {
  if (v.empty() || vectors_.count(v.data())) return;
  vectors_[v.data()] = {upload(v.data(), v.size() * 4), int64_t(v.size() * 4)};
}

const DeviceTensor& DeviceWeights::tensor(const QTensor& t) const {
  const auto it = tensors_.find(t.data);
  if (it == tensors_.end() || it->second.rows != t.rows || it->second.cols != t.cols)
    throw Error("device backend: a " + std::to_string(t.rows) + "x" + std::to_string(t.cols) + " " +
                    weight_type_name(t.type) + " weight was not uploaded by prepare()",
                kExitFailure);
  return it->second;
}

DeviceTensor::Array DeviceWeights::vector(const float* host) const {
  const auto it = vectors_.find(host);
  if (it == vectors_.end()) throw Error("device backend: a norm vector was not uploaded by prepare()", kExitFailure);
  return it->second;
}

}  // namespace qt::rt
