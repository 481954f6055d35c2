#include "runtime/gpu/device_weights.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "common/error.h"
#include "common/half.h"
#include "device/plan/run_plan.h"
#include "kernels_src/fraglinear/frag_family.h"
#include "kernels_src/fraglinear/frag_layout.h"
#include "kernels_src/moe/moe_reference.h"
#include "models/core/dequantize_f16.h"

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

// Whether every fp32 scale of a Q8_0 tensor survives the frag layout's rounding to fp16: from 65,520 up it
// would become infinity (and NaN stays NaN, which the file layout's kernels would compute with too).
bool q8_0_scales_fit_f16(const QTensor& t) {
  if (!t.scales_f32) return true;  // a concatenation's dims own no scales: each part was checked on its own
  const int64_t n = t.rows * t.cols / t.group_size;
  float largest = 0.0f;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::fabs(t.scales_f32[i]));
  return largest < 65520.0f;
}

// The frag layout's bits for `t`, or 0 when it cannot hold it (another type, a group the frag linear families
// do not serve, or Q8_0 scales beyond fp16's range: such a tensor keeps the file layout and its kernels).
int frag_bits(const QTensor& t) {
  if (!kernels::frag::frag_layout_holds(t.type)) return 0;
  const kernels::frag::FragDims d{t.rows, t.cols, t.group_size, kernels::frag::frag_layout_bits(t.type)};
  if (!kernels::frag::frag_dims_check(d).empty() || d.group % 32 || d.weight_words() > INT32_MAX) return 0;
  if (t.type == WeightType::Q8_0 && !q8_0_scales_fit_f16(t)) return 0;
  return d.bits;
}

bool frag_stored(const QTensor& t, DeviceWeights::Storage storage) {
  return (storage == DeviceWeights::Storage::kFrag || storage == DeviceWeights::Storage::kFragF16) && frag_bits(t);
}

// The fp16 copy beside the frag arrays (Storage::kFragF16).
bool f16_copy_stored(const QTensor& t, DeviceWeights::Storage storage) {
  return storage == DeviceWeights::Storage::kFragF16 && frag_bits(t);
}

// fp16 "values" on the device: the float types the families do not take, and quantized weights kept as fp16.
bool f16_stored(const QTensor& t, DeviceWeights::Storage storage) {
  return t.type == WeightType::F32 || t.type == WeightType::BF16 ||
         (storage == DeviceWeights::Storage::kF16 && weight_traits(t.type).quantized);
}

// How a concatenation of parts is stored, each a way that keeps a part's rows contiguous: the frag layout
// (column tiles one after another), fp16 values or a row-major file layout ([N][...] arrays). kNone where
// the storage cannot: an in-major file layout interleaves the parts' columns in every row of K.
enum class ConcatLayout { kNone, kFrag, kF16, kRows };

// The parts' dimensions as one tensor: the concatenation's type and dims, and no values (the first part's
// pointers would name only that part's rows: a check reading rows x cols of them would run past it).
QTensor concatenated_dims(std::span<const QTensor* const> parts) {
  const QTensor& first = *parts.front();
  QTensor whole;
  whole.type = first.type, whole.cols = first.cols, whole.group_size = first.group_size;
  for (const QTensor* p : parts) whole.rows += p->rows;
  return whole;
}

ConcatLayout concatenation_kind(std::span<const QTensor* const> parts, DeviceWeights::Storage storage) {
  if (parts.empty()) return ConcatLayout::kNone;
  const QTensor& first = *parts.front();
  for (const QTensor* p : parts)
    if (p->empty() || p->type != first.type || p->group_size != first.group_size || p->cols != first.cols)
      return ConcatLayout::kNone;
  if (frag_stored(first, storage)) {
    // Each part whole column tiles, so that its tiles start where the previous part's end; and the whole
    // within what the frag families take.
    for (const QTensor* p : parts)
      if (!frag_stored(*p, storage) || p->rows % kernels::frag::kTileN) return ConcatLayout::kNone;
    return frag_stored(concatenated_dims(parts), storage) ? ConcatLayout::kFrag : ConcatLayout::kNone;
  }
  if (f16_stored(first, storage)) return ConcatLayout::kF16;
  return weight_traits(first.type).in_major ? ConcatLayout::kNone : ConcatLayout::kRows;
}

// The bytes of frag array `name` for the columns of `d` (`pad`: with the zero tiles after the last weight
// tile). The layout stores column tiles one after another in each array, so for d.n a multiple of the column
// tile, without the pad, this is also where column d.n starts.
int64_t frag_array_bytes(const kernels::frag::FragDims& d, const std::string& name, bool pad) {
  if (name == "bq") return (d.weight_words() - (pad ? 0 : kernels::frag::kPadTiles * d.tile_words())) * 4;
  if (name == "bs") return d.scale_halves() * 2;
  if (name == "bz") return d.zero_words() * 4;
  throw Error("device weights: the frag layout has no array '" + name + "'", kExitFailure);
}

uint64_t file_layout_bytes(const QTensor& t) {
  uint64_t bytes = 0;
  for (const ArraySpec& spec : weight_traits(t.type).array_specs()) bytes += t.array_bytes(spec);
  return bytes;
}

}  // namespace

uint64_t DeviceWeights::bytes_for(const QTensor& t, Storage storage) {
  if (t.empty()) return 0;
  // The frag layout holds the file's codes, scales and zeros in another order: the same bytes (Q8_0's fp32
  // scales become fp16, so at most these).
  if (!frag_stored(t, storage) && f16_stored(t, storage)) return uint64_t(t.rows * t.cols) * 2;
  return file_layout_bytes(t) + (f16_copy_stored(t, storage) ? uint64_t(t.rows * t.cols) * 2 : 0);
}

uint64_t DeviceWeights::concatenated_bytes(std::span<const QTensor* const> parts, Storage storage) {
  if (concatenation_kind(parts, storage) == ConcatLayout::kNone) return 0;
  return bytes_for(concatenated_dims(parts), storage);
}

uint64_t DeviceWeights::stack_bytes(const ExpertStack& s, Storage storage) {
  return s.empty() ? 0 : bytes_for(s.base, storage) * uint64_t(s.experts);
}

// `t` dequantized to fp16 bits, [rows][cols], on every core (dequantize_f16: bit for bit the reference rows
// rounded to fp16), in one host buffer kept for the next weight: the 8B model's MLP matrices are 100 MB each,
// and fresh pages for every one would be zeroed by the kernel before being written.
std::span<const uint16_t> DeviceWeights::f16_values(const QTensor& t) {
  const size_t n = size_t(t.rows * t.cols);
  if (f16_staging_.size() < n) f16_staging_.resize(n);
  dequantize_f16(t, f16_staging_.data());
  return {f16_staging_.data(), n};
}

dev::DevPtr DeviceWeights::allocate(size_t bytes) {
  dev::Buffer b(device_, bytes);
  const dev::DevPtr p = b.ptr();
  buffers_.push_back(std::move(b));
  bytes_ += bytes;
  return p;
}

// The file-layout arrays go up to temporary buffers, the repack family writes each frag array where `at` places
// it, and the temporaries are freed once it has run.
void DeviceWeights::repack_frag(const QTensor& t, const ArrayAt& at) {
  const kernels::KernelFamily& f = kernels::frag::repack_family(t.type);
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
      ptrs[spec.name] = at(spec.name, spec.bytes());
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
    repack_frag(t, [&](const std::string& name, int64_t bytes) {
      const dev::DevPtr p = allocate(size_t(bytes));
      d.arrays[name] = {p, bytes};
      return p;
    });
    if (f16_copy_stored(t, storage)) {
      const std::span<const uint16_t> h = f16_values(t);
      d.arrays["values"] = {upload(h.data(), h.size_bytes()), int64_t(h.size_bytes())};
    }
  } else if (f16_stored(t, storage)) {
    const std::span<const uint16_t> h = f16_values(t);
    d.type = WeightType::F16;
    d.group = t.cols;
    d.arrays["values"] = {upload(h.data(), h.size_bytes()), int64_t(h.size_bytes())};
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

bool DeviceWeights::add_concatenated(std::span<const QTensor* const> parts, Storage storage) {
  const ConcatLayout kind = concatenation_kind(parts, storage);
  if (kind == ConcatLayout::kNone) return false;
  // A part already on the device would be held twice.
  for (const QTensor* p : parts)
    if (tensors_.count(p->data)) return false;
  const QTensor dims = concatenated_dims(parts);
  Concatenated c;
  DeviceTensor& whole = c.whole;
  whole.rows = dims.rows, whole.cols = dims.cols;
  whole.type = kind == ConcatLayout::kF16 ? WeightType::F16 : dims.type;
  whole.group = kind == ConcatLayout::kF16 || dims.group_size <= 0 ? dims.cols : dims.group_size;
  int64_t row0 = 0;
  for (const QTensor* p : parts) {
    DeviceTensor view;
    view.type = whole.type, view.rows = p->rows, view.cols = p->cols, view.group = whole.group;
    // Array `name` of the whole is allocated at its first use; the part's starts `offset` bytes into it.
    auto place = [&](const std::string& name, int64_t whole_bytes, int64_t offset, int64_t bytes) {
      auto [it, fresh] = whole.arrays.try_emplace(name);
      if (fresh) it->second = {allocate(size_t(whole_bytes)), whole_bytes};
      if (offset + bytes > it->second.bytes)
        throw Error("device weights: a part's array '" + name + "' runs past its concatenation", kExitFailure);
      view.arrays[name] = {it->second.ptr.offset(size_t(offset)), bytes};
      return view.arrays[name].ptr;
    };
    switch (kind) {
      case ConcatLayout::kFrag: {
        // In order: a part's repack also zeroes the pad tiles after its last tile, which are the next part's
        // first tiles until that part's repack writes them (and the whole's pad after the last part).
        const int bits = frag_bits(dims);
        const kernels::frag::FragDims all{dims.rows, dims.cols, dims.group_size, bits};
        const kernels::frag::FragDims before{row0, dims.cols, dims.group_size, bits};
        repack_frag(*p, [&](const std::string& name, int64_t bytes) {
          return place(name, frag_array_bytes(all, name, true), frag_array_bytes(before, name, false), bytes);
        });
        if (f16_copy_stored(*p, storage)) {  // the copy's rows one part after another, as kF16's
          const std::span<const uint16_t> h = f16_values(*p);
          const int64_t bytes = int64_t(h.size_bytes());
          device_.copy_to_device(place("values", dims.rows * dims.cols * 2, row0 * dims.cols * 2, bytes), h.data(),
                                 h.size_bytes());
        }
        break;
      }
      case ConcatLayout::kF16: {
        const std::span<const uint16_t> h = f16_values(*p);
        const int64_t bytes = int64_t(h.size_bytes());
        device_.copy_to_device(place("values", dims.rows * dims.cols * 2, row0 * dims.cols * 2, bytes), h.data(),
                               h.size_bytes());
        break;
      }
      case ConcatLayout::kRows:
        for (const ArraySpec& spec : weight_traits(p->type).array_specs()) {
          const void* src = p->array(spec.array);
          if (!src) throw Error(std::string("weight of type ") + weight_type_name(p->type) + " lacks its '" +
                                weight_array_name(spec.array) + "' array", kExitFailure);
          // Row-major: a part's rows are array_bytes / rows bytes each, one after another.
          const int64_t bytes = int64_t(p->array_bytes(spec)), per_row = bytes / p->rows;
          const dev::DevPtr at =
              place(weight_array_name(spec.array), int64_t(dims.array_bytes(spec)), row0 * per_row, bytes);
          device_.copy_to_device(at, src, size_t(bytes));
        }
        break;
      case ConcatLayout::kNone: break;
    }
    c.parts.push_back(p->data);
    tensors_.emplace(p->data, std::move(view));
    row0 += p->rows;
  }
  concatenations_.emplace(parts.front()->data, std::move(c));
  return true;
}

const DeviceTensor* DeviceWeights::concatenated(std::span<const QTensor* const> parts) const {
  if (parts.empty()) return nullptr;
  const auto it = concatenations_.find(parts.front()->data);
  if (it == concatenations_.end() || it->second.parts.size() != parts.size()) return nullptr;
  for (size_t i = 0; i < parts.size(); ++i)
    if (it->second.parts[i] != parts[i]->data) return nullptr;
  return &it->second.whole;
}

void DeviceWeights::add_stack(const ExpertStack& s, bool trtllm, Storage storage) {
  if (s.empty() || tensors_.count(s.base.data)) return;
  const QTensor& t = s.base;
  if (!weight_traits(t.type).quantized)
    throw Error(std::string("device backend: MoE experts of type ") + weight_type_name(t.type) +
                    " are not served (moe3 experts are q8_0, int8-sym, int8-asym or awq)",
                kExitUnavailable);
  if (frag_stored(t, storage)) {
    // Each expert repacked on the device into its share of one block per frag array, experts back to back
    // with each one's pad tiles after its own last tile, as the Hopper grouped families take them.
    DeviceTensor d;
    d.type = t.type, d.rows = t.rows, d.cols = t.cols, d.experts = s.experts, d.group = t.group_size;
    for (int64_t e = 0; e < s.experts; ++e)
      repack_frag(s.expert(e), [&](const std::string& name, int64_t bytes) {
        auto [it, fresh] = d.arrays.try_emplace(name);
        if (fresh) it->second = {allocate(size_t(bytes * s.experts)), bytes * s.experts};
        return it->second.ptr.offset(size_t(bytes * e));
      });
    tensors_.emplace(t.data, std::move(d));
    return;
  }
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
