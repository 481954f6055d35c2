#include <algorithm>
#include <vector>

#include "common/parallel_ranges.h"
#include "common/progress.h"
#include "models/synthetic/random_weights.h"
#include "models/synthetic/synthetic.h"

namespace qt::synthetic {

void write_model_file(const std::string& path, const WriterOptions& options, uint64_t seed, bool quiet,
                      int64_t chunk_floats) {
  auto writer = ModelWriter::create(path, options);
  uint64_t total = 0;
  for (const auto& s : writer->plan()) total += static_cast<uint64_t>(s.rows * s.cols);
  Progress progress("synthetic", static_cast<double>(total) / 1e6, "M weights", quiet);
  // Row ranges of chunk_floats: values depend only on (seed, name, index), so generating a range
  // gives exactly the floats of the whole tensor, and memory stays one range.
  std::vector<float> values;
  uint64_t done = 0;
  for (const TensorSlot& slot : writer->plan()) {
    const int64_t step = chunk_rows(slot, chunk_floats);
    values.resize(static_cast<size_t>(step * slot.cols));
    for (int64_t row = 0; row < slot.rows; row += step) {
      const int64_t count = std::min(step, slot.rows - row);
      const uint64_t n = static_cast<uint64_t>(count * slot.cols);
      // Each value depends only on (seed, name, index), so the range is generated in pieces on every core.
      parallel_ranges(int64_t(n), double(n), [&](int64_t b, int64_t e) {
        generate_values(seed, slot.hf_name, static_cast<uint64_t>(row * slot.cols + b), uint64_t(e - b), values.data() + b);
      }, double(1 << 18));
      writer->write_float_rows(slot, row, count, values.data());
      done += n;
      progress.update(static_cast<double>(done) / 1e6, slot.hf_name);
    }
  }
  writer->finish();
  progress.finish();
}

}  // namespace qt::synthetic
