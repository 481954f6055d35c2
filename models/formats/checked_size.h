#pragma once
// 64-bit size arithmetic that refuses to wrap: a hostile header must produce an error, never a small
// bogus size that then passes the file-size check.
#include <cstdint>
#include <string>

#include "common/error.h"

namespace qt::formats {

class CheckedSize {
 public:
  explicit CheckedSize(const std::string& source) : source_(source) {}
  uint64_t mul(uint64_t a, uint64_t b) const {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
  }
  uint64_t mul(uint64_t a, uint64_t b, uint64_t c) const { return mul(mul(a, b), c); }
  uint64_t add(uint64_t a, uint64_t b) const {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) overflow();
    return r;
  }

 private:
  [[noreturn]] void overflow() const { fail_file(source_, "header implies a file size beyond 2^64 bytes"); }
  const std::string& source_;
};

}  // namespace qt::formats
