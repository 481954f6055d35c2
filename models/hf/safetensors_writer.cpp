#include "models/hf/safetensors_writer.h"

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/half.h"

namespace qt::hf {

uint64_t TensorSpec::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

namespace {

// The JSON header, padded with spaces so the data starts 8-byte aligned (as the reference writer does).
std::string make_header(const std::vector<TensorSpec>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t n = t.nbytes();
    h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = h.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  return text;
}

}  // namespace

uint64_t SafetensorsWriter::header_bytes(const std::vector<TensorSpec>& tensors,
                                         const std::map<std::string, std::string>& metadata) {
  return 8 + make_header(tensors, metadata).size();
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tensors_(std::move(tensors)) {
  for (size_t i = 0; i < tensors_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (tensors_[i].name == tensors_[j].name) fail_file(path_, "duplicate tensor name '" + tensors_[i].name + "'");
  std::string header = make_header(tensors_, metadata);
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) fail_file(path_, std::string("cannot create: ") + std::strerror(errno), kExitFailure);
  uint8_t len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  put(len, 8);
  put(header.data(), header.size());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(path_.c_str());
  }
}

void SafetensorsWriter::put(const void* bytes, uint64_t n) {
  if (n && std::fwrite(bytes, 1, n, file_) != n)
    fail_file(path_, std::string("write failed: ") + std::strerror(errno), kExitFailure);
}

void SafetensorsWriter::write(const std::string& name, const void* bytes, uint64_t nbytes) {
  if (next_ >= tensors_.size())
    fail_file(path_, "tensor '" + name + "' written after all declared tensors", kExitFailure);
  const TensorSpec& t = tensors_[next_];
  if (t.name != name)
    fail_file(path_, "tensor '" + name + "' written where '" + t.name + "' is declared", kExitFailure);
  const uint64_t declared = t.nbytes();
  if (nbytes > declared - written_)
    fail_file(path_, "tensor '" + name + "': " + std::to_string(written_ + nbytes) + " bytes given, " +
                         std::to_string(declared) + " declared", kExitFailure);
  put(bytes, nbytes);
  written_ += nbytes;
  if (written_ == declared) {
    ++next_;
    written_ = 0;
  }
}

void SafetensorsWriter::write_float(const std::string& name, const float* values, uint64_t count) {
  if (next_ >= tensors_.size() || tensors_[next_].name != name) {
    write(name, nullptr, 0);  // reports the ordering problem
    return;
  }
  const DType dt = tensors_[next_].dtype;
  if (dt == DType::F32 || count == 0) {
    write(name, values, count * 4);
    return;
  }
  if (dt != DType::F16 && dt != DType::BF16)
    fail_file(path_, "tensor '" + name + "' is declared " + dtype_name(dt) + ", not a float type", kExitFailure);
  // Converted in chunks so a large tensor costs no second full-size buffer.
  constexpr uint64_t kChunk = 1u << 20;
  std::vector<uint16_t> bits(std::min<uint64_t>(count, kChunk));
  for (uint64_t done = 0; done < count; done += kChunk) {
    const uint64_t n = std::min<uint64_t>(kChunk, count - done);
    for (uint64_t i = 0; i < n; ++i)
      bits[i] = dt == DType::F16 ? float_to_half_bits(values[done + i]) : float_to_bf16_bits(values[done + i]);
    write(name, bits.data(), n * 2);
  }
}

void SafetensorsWriter::finish() {
  if (finished_) return;
  if (next_ != tensors_.size() || written_ != 0)
    fail_file(path_, "finished after " + std::to_string(next_) + " of " + std::to_string(tensors_.size()) +
                         " tensors (next: '" + tensors_[next_].name + "')", kExitFailure);
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    std::remove(path_.c_str());
    fail_file(path_, std::string("close failed: ") + std::strerror(errno), kExitFailure);
  }
  finished_ = true;
}

}  // namespace qt::hf
