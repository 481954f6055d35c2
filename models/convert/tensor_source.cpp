#include "models/convert/tensor_source.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "models/core/weights.h"

namespace qt::convert {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// "model.layers.3.mlp.experts.7.gate_proj.weight" -> prefix "model.layers.3.mlp.experts.", expert 7,
// projection "gate_proj".
bool split_expert_name(const std::string& name, std::string& prefix, int64_t& expert, std::string& proj) {
  const std::string marker = ".mlp.experts.";
  auto m = name.find(marker);
  if (m == std::string::npos) return false;
  const size_t start = m + marker.size();
  size_t dot = name.find('.', start);
  if (dot == std::string::npos || dot == start) return false;
  expert = 0;
  for (size_t i = start; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    expert = expert * 10 + (name[i] - '0');
  }
  const std::string rest = name.substr(dot + 1);
  if (rest != "gate_proj.weight" && rest != "up_proj.weight" && rest != "down_proj.weight") return false;
  prefix = name.substr(0, start);
  proj = rest.substr(0, rest.find('.'));
  return true;
}

std::string module_of(const std::string& hf_name) {
  const std::string suffix = ".weight";
  if (hf_name.size() > suffix.size() && hf_name.compare(hf_name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return hf_name.substr(0, hf_name.size() - suffix.size());
  return hf_name;
}

}  // namespace

TensorSource::TensorSource(const hf::HfCheckpoint& ckpt, const hf::HfModelConfig& config)
    : ckpt_(ckpt), config_(config) {}

std::optional<TensorSource::AwqRefs> TensorSource::find_awq(const std::string& hf_name) const {
  const std::string module = module_of(hf_name);
  AwqRefs r{ckpt_.find(module + ".qweight"), ckpt_.find(module + ".qzeros"), ckpt_.find(module + ".scales")};
  if (!r.qweight && !r.qzeros && !r.scales) return std::nullopt;
  const std::string where = ckpt_.dir();
  if (!r.qweight || !r.qzeros || !r.scales)
    fail_file(where, "AWQ tensor '" + module + "' is incomplete: needs .qweight, .qzeros and .scales");
  if (!config_.awq_group_size)
    fail_file(where, "tensor '" + module + ".qweight' is AWQ-packed but config.json has no AWQ quantization_config");
  return r;
}

bool TensorSource::has(const std::string& hf_name) const {
  if (ckpt_.find(hf_name)) return true;
  std::string prefix, proj;
  int64_t e = 0;
  if (split_expert_name(hf_name, prefix, e, proj)) {
    const std::string fused = prefix + (proj == "down_proj" ? "down_proj" : "gate_up_proj");
    if (ckpt_.find(fused) || ckpt_.find(fused + ".weight")) return true;
  }
  const std::string module = module_of(hf_name);
  return bool(ckpt_.find(module + ".qweight"));
}

void TensorSource::check_shape(const hf::TensorRef& r, const std::vector<int64_t>& expect) const {
  if (r.info->shape != expect)
    fail_file(r.file->path(), "tensor '" + r.info->name + "' has shape " + r.info->shape_string() + ", expected " +
                                  shape_text(expect));
}

void TensorSource::read_range(const hf::TensorRef& r, uint64_t first, uint64_t count, float* out) const {
  r.file->read_float(*r.info, first, count, out);
  r.file->release(*r.info, first, count);
  bytes_read_ += count * hf::dtype_size(r.info->dtype);
}

void TensorSource::done_with(const hf::TensorRef& r) const {
  r.file->release(*r.info);
  bytes_read_ += r.info->nbytes;
}

bool TensorSource::read_fused_expert(const std::string& hf_name, int64_t rows, int64_t cols, int64_t first_row,
                                     int64_t row_count, float* out) const {
  std::string prefix, proj;
  int64_t e = 0;
  if (!split_expert_name(hf_name, prefix, e, proj)) return false;
  const bool down = proj == "down_proj";
  const std::string base = prefix + (down ? "down_proj" : "gate_up_proj");
  hf::TensorRef r = ckpt_.find(base);
  if (!r) r = ckpt_.find(base + ".weight");
  if (!r) return false;
  const int64_t E = config_.config.num_experts;
  if (e >= E) fail_file(r.file->path(), "expert " + std::to_string(e) + " requested from '" + r.info->name + "' with " + std::to_string(E) + " experts");
  // gate_up_proj [E, 2I, H]: rows [0, I) of expert e are gate, [I, 2I) up. down_proj [E, H, I].
  check_shape(r, down ? std::vector<int64_t>{E, rows, cols} : std::vector<int64_t>{E, 2 * rows, cols});
  const uint64_t per_expert = static_cast<uint64_t>(rows * cols) * (down ? 1 : 2);
  uint64_t first = static_cast<uint64_t>(e) * per_expert + static_cast<uint64_t>(first_row * cols);
  if (proj == "up_proj") first += static_cast<uint64_t>(rows * cols);
  read_range(r, first, static_cast<uint64_t>(row_count * cols), out);
  return true;
}

void TensorSource::dequantize_awq_rows(const AwqRefs& refs, int64_t rows, int64_t cols, int64_t first_row,
                                       int64_t row_count, float* out) const {
  // w[n][k] = (q[k][n] - z[k/G][n]) * s[k/G][n], in fp32 (models/core/weights.h). The arrays are read
  // straight from the mapping (memcpy: safetensors offsets need not be aligned).
  const int64_t N = rows, K = cols, G = *config_.awq_group_size, words = N / 8;
  const uint8_t* qweight = refs.qweight.file->data(*refs.qweight.info);
  const uint8_t* qzeros = refs.qzeros.file->data(*refs.qzeros.info);
  const uint8_t* scales = refs.scales.file->data(*refs.scales.info);
  auto word = [](const uint8_t* base, int64_t i) {
    uint32_t w = 0;
    std::memcpy(&w, base + 4 * i, 4);
    return w;
  };
  for (int64_t k = 0; k < K; ++k) {
    const int64_t g = k / G;
    for (int64_t n = first_row; n < first_row + row_count; ++n) {
      const int q = static_cast<int>(awq_nibble(word(qweight, k * words + n / 8), n % 8));
      const int z = static_cast<int>(awq_nibble(word(qzeros, g * words + n / 8), n % 8));
      uint16_t s = 0;
      std::memcpy(&s, scales + 2 * (g * N + n), 2);
      out[(n - first_row) * K + k] = static_cast<float>(q - z) * half_bits_to_float(s);
    }
  }
  if (first_row + row_count == rows) {
    done_with(refs.qweight);
    done_with(refs.qzeros);
    done_with(refs.scales);
  }
}

void TensorSource::read_float_rows(const std::string& hf_name, int64_t rows, int64_t cols, int64_t first_row,
                                   int64_t row_count, float* out) const {
  const std::vector<int64_t> expect = rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
  if (first_row < 0 || row_count < 0 || row_count > rows - first_row)
    throw Error("read_float_rows: rows [" + std::to_string(first_row) + ", " + std::to_string(first_row + row_count) +
                    ") outside " + hf_name + " with " + std::to_string(rows) + " rows", kExitFailure);
  if (hf::TensorRef r = ckpt_.find(hf_name)) {
    check_shape(r, expect);
    // In slices, each released right after it is widened, so the mapped source never holds more than one
    // slice of resident pages on top of the caller's fp32 buffer.
    constexpr uint64_t kSlice = 4u << 20;
    const uint64_t begin = static_cast<uint64_t>(first_row * cols), n = static_cast<uint64_t>(row_count * cols);
    for (uint64_t i = 0; i < n; i += kSlice) read_range(r, begin + i, std::min(kSlice, n - i), out + i);
    return;
  }
  if (read_fused_expert(hf_name, rows, cols, first_row, row_count, out)) return;
  if (auto awq = find_awq(hf_name)) {
    check_awq(*awq, rows, cols);
    dequantize_awq_rows(*awq, rows, cols, first_row, row_count, out);
    return;
  }
  fail_file(ckpt_.dir(), "tensor '" + hf_name + "' not found in the checkpoint");
}

void TensorSource::check_awq(const AwqRefs& refs, int64_t rows, int64_t cols) const {
  const int32_t G = *config_.awq_group_size;
  const int64_t N = rows, K = cols;
  if (N % 8 != 0 || K % G != 0)
    fail_file(refs.qweight.file->path(), "AWQ tensor '" + refs.qweight.info->name + "' for a [" + std::to_string(N) +
                                             ", " + std::to_string(K) + "] weight: needs out % 8 == 0 and group " +
                                             std::to_string(G) + " dividing in");
  check_shape(refs.qweight, {K, N / 8});
  check_shape(refs.qzeros, {K / G, N / 8});
  check_shape(refs.scales, {K / G, N});
  for (const hf::TensorRef* r : {&refs.qweight, &refs.qzeros})
    if (r->info->dtype != hf::DType::I32)
      fail_file(r->file->path(), "AWQ tensor '" + r->info->name + "' has dtype " + hf::dtype_name(r->info->dtype) + ", expected I32");
  if (refs.scales.info->dtype != hf::DType::F16)
    fail_file(refs.scales.file->path(), "AWQ tensor '" + refs.scales.info->name + "' has dtype " +
                                            hf::dtype_name(refs.scales.info->dtype) + ", expected F16");
}

bool TensorSource::read_awq(const std::string& hf_name, int64_t rows, int64_t cols, int32_t group_size,
                            AwqPacked& out) const {
  auto refs = find_awq(hf_name);
  if (!refs) return false;
  if (*config_.awq_group_size != group_size) return false;
  check_awq(*refs, rows, cols);
  out.group_size = group_size;
  out.qweight.resize(refs->qweight.info->numel());
  out.qzeros.resize(refs->qzeros.info->numel());
  out.scales.resize(refs->scales.info->numel());
  std::memcpy(out.qweight.data(), refs->qweight.file->data(*refs->qweight.info), refs->qweight.info->nbytes);
  std::memcpy(out.qzeros.data(), refs->qzeros.file->data(*refs->qzeros.info), refs->qzeros.info->nbytes);
  std::memcpy(out.scales.data(), refs->scales.file->data(*refs->scales.info), refs->scales.info->nbytes);
  done_with(refs->qweight);
  done_with(refs->qzeros);
  done_with(refs->scales);
  return true;
}

bool TensorSource::same_values(const std::string& a, const std::string& b) const {
  hf::TensorRef ra = ckpt_.find(a), rb = ckpt_.find(b);
  if (!ra || !rb || ra.info->shape != rb.info->shape) return false;
  if (ra.info->dtype == rb.info->dtype) {
    const bool same = std::memcmp(ra.file->data(*ra.info), rb.file->data(*rb.info), ra.info->nbytes) == 0;
    ra.file->release(*ra.info);
    rb.file->release(*rb.info);
    return same;
  }
  if (!hf::dtype_is_float_convertible(ra.info->dtype) || !hf::dtype_is_float_convertible(rb.info->dtype)) return false;
  // Different storage types: compare as fp32 in chunks.
  constexpr uint64_t kChunk = 1 << 16;
  std::vector<float> x(kChunk), y(kChunk);
  bool same = true;
  for (uint64_t i = 0; same && i < ra.info->numel(); i += kChunk) {
    const uint64_t n = std::min<uint64_t>(kChunk, ra.info->numel() - i);
    ra.file->read_float(*ra.info, i, n, x.data());
    rb.file->read_float(*rb.info, i, n, y.data());
    same = std::memcmp(x.data(), y.data(), n * sizeof(float)) == 0;
  }
  ra.file->release(*ra.info);
  rb.file->release(*rb.info);
  return same;
}

}  // namespace qt::convert
