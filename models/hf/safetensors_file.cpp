#include "models/hf/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qt::hf {

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : map_(path) { parse_header(); }

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {

// Unsigned integer from JSON, rejecting negatives, fractions and values above `max`.
uint64_t json_u64(const nlohmann::json& v, uint64_t max, bool& ok) {
  ok = false;
  if (v.is_number_unsigned()) {
    uint64_t x = v.get<uint64_t>();
    ok = x <= max;
    return x;
  }
  if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    ok = x >= 0 && static_cast<uint64_t>(x) <= max;
    return static_cast<uint64_t>(x);
  }
  return 0;
}

}  // namespace

void SafetensorsFile::parse_header() {
  const std::string& p = map_.path();
  const uint64_t size = map_.size();
  if (size < 8) fail_file(p, "not a safetensors file: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | map_.data()[i];
  if (header_len > kMaxHeaderBytes)
    fail_file(p, "safetensors header length " + std::to_string(header_len) + " exceeds the " +
                     std::to_string(kMaxHeaderBytes) + "-byte limit");
  if (header_len > size - 8)
    fail_file(p, "safetensors header length " + std::to_string(header_len) + " runs past the end of the file (" +
                     std::to_string(size) + " bytes)");
  if (header_len < 2) fail_file(p, "safetensors header of " + std::to_string(header_len) + " bytes cannot hold a JSON object");

  const char* text = reinterpret_cast<const char*>(map_.data() + 8);
  nlohmann::json header = nlohmann::json::parse(text, text + header_len, nullptr, false);
  if (header.is_discarded()) fail_file(p, "safetensors header is not valid JSON");
  if (!header.is_object()) fail_file(p, "safetensors header is not a JSON object");

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  std::vector<const TensorInfo*> by_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail_file(p, "__metadata__ is not a JSON object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail_file(p, "__metadata__ entry '" + m.key() + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& why) { fail_file(p, "tensor '" + name + "': " + why); };
    if (!v.is_object()) bad("entry is not a JSON object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) bad("missing or non-string dtype");
    const std::string dtype_text = v["dtype"].get<std::string>();
    auto dtype = parse_dtype(dtype_text);
    if (!dtype) bad("unknown dtype '" + dtype_text + "'");
    if (!v.contains("shape") || !v["shape"].is_array()) bad("missing or non-array shape");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      bad("data_offsets must be an array of two integers");

    TensorInfo t;
    t.name = name;
    t.dtype = *dtype;
    // The element count is bounded by the data size, which keeps the products below 2^64.
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      bool ok = false;
      uint64_t dim = json_u64(d, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), ok);
      if (!ok) bad("shape " + v["shape"].dump() + " has an entry that is not a non-negative integer");
      t.shape.push_back(static_cast<int64_t>(dim));
      if (dim != 0 && numel > data_size / dim) bad("shape " + v["shape"].dump() + " needs more bytes than the file holds");
      numel *= dim;
    }
    bool ok_begin = false, ok_end = false;
    uint64_t begin = json_u64(v["data_offsets"][0], data_size, ok_begin);
    uint64_t end = json_u64(v["data_offsets"][1], data_size, ok_end);
    if (!ok_begin || !ok_end)
      bad("data_offsets " + v["data_offsets"].dump() + " lie outside the data area (" + std::to_string(data_size) +
          " bytes)");
    if (end < begin) bad("data_offsets " + v["data_offsets"].dump() + " end before they begin");
    const uint64_t expect = numel * dtype_size(t.dtype);  // numel <= data_size, so no overflow
    if (end - begin != expect)
      bad("data_offsets " + v["data_offsets"].dump() + " span " + std::to_string(end - begin) + " bytes but " +
          dtype_text + " " + v["shape"].dump() + " needs " + std::to_string(numel) + " x " +
          std::to_string(dtype_size(t.dtype)));
    t.offset = data_start + begin;
    t.nbytes = end - begin;
    tensors_.emplace(name, std::move(t));
  }
  for (const auto& [name, t] : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->nbytes < b->nbytes;
  });
  // Compare each tensor with the one reaching furthest so far, not just its neighbour: an empty tensor
  // sorted between two overlapping ones would otherwise hide the overlap.
  const TensorInfo* furthest = nullptr;
  for (const TensorInfo* cur : by_offset) {
    if (furthest && cur->nbytes > 0 && furthest->offset + furthest->nbytes > cur->offset)
      fail_file(p, "tensors '" + furthest->name + "' and '" + cur->name + "' overlap in the data area");
    if (!furthest || cur->offset + cur->nbytes > furthest->offset + furthest->nbytes) furthest = cur;
  }
}

void SafetensorsFile::read_float(const TensorInfo& t, uint64_t first, uint64_t count, float* out) const {
  if (!dtype_is_float_convertible(t.dtype))
    fail_file(path(), "tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) +
                          "; only F32, F16 and BF16 can be read as weights");
  if (first > t.numel() || count > t.numel() - first)
    fail_file(path(), "tensor '" + t.name + "': read of elements [" + std::to_string(first) + ", " +
                          std::to_string(first + count) + ") outside its " + std::to_string(t.numel()) + " elements");
  convert_to_float(t.dtype, data(t) + first * dtype_size(t.dtype), count, out);
}

}  // namespace qt::hf
