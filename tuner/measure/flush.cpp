#include "tuner/measure/flush.h"

#include <fstream>
#include <string>

namespace qt::tune {

CacheFlusher::CacheFlusher(size_t bytes) : buf_(bytes, 0) {}

void CacheFlusher::operator()() {
  // Writing (not just reading) evicts dirty and clean lines alike; the changing value defeats elision.
  ++round_;
  volatile unsigned char* p = buf_.data();
  for (size_t i = 0; i < buf_.size(); i += 64) p[i] = round_;
}

}  // namespace qt::tune
