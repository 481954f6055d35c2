#pragma once
// SHA-256 (FIPS 180-4) for cache keys and CUBIN identity: collisions must not silently hand back the wrong
// binary, so a cryptographic digest is used rather than a fast non-cryptographic hash.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qt::compile {

class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Length-prefixed field, so ("ab","c") and ("a","bc") hash differently.
  Sha256& field(std::string_view s);
  std::array<uint8_t, 32> digest();
  std::string hex();  // 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace qt::compile
