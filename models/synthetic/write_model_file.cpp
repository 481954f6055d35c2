#include <vector>

#include "common/progress.h"
#include "models/synthetic/random_weights.h"
#include "models/synthetic/synthetic.h"

namespace qt::synthetic {

void write_model_file(const std::string& path, const WriterOptions& options, uint64_t seed, bool quiet) {
  auto writer = ModelWriter::create(path, options);
  uint64_t total = 0;
  for (const auto& s : writer->plan()) total += static_cast<uint64_t>(s.rows * s.cols);
  Progress progress("synthetic", static_cast<double>(total) / 1e6, "M weights", quiet);
  std::vector<float> values;
  uint64_t done = 0;
  for (const TensorSlot& slot : writer->plan()) {
    const uint64_t n = static_cast<uint64_t>(slot.rows * slot.cols);
    if (values.size() < n) values.resize(n);
    generate_values(seed, slot.hf_name, 0, n, values.data());
    writer->write_float(slot, values.data());
    done += n;
    progress.update(static_cast<double>(done) / 1e6, slot.hf_name);
  }
  writer->finish();
  progress.finish();
}

}  // namespace qt::synthetic
