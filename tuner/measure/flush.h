#pragma once
// Cache flush between timed repetitions, sized from the device: twice the largest cache level, so the
// candidate starts with cold weights as a decode matvec does in the model.
#include <cstddef>
#include <vector>

#include "common/cpu_info.h"

namespace qt::tune {

class CacheFlusher {
 public:
  explicit CacheFlusher(size_t bytes);
  void operator()();
  size_t bytes() const { return buf_.size(); }

 private:
  std::vector<unsigned char> buf_;
  unsigned char round_ = 0;
};

}  // namespace qt::tune
