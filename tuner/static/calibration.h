#pragma once
// The static model (roofline.h) against what a GPU measured: every verified row of a tuning store, predicted
// with that GPU's own figures (its fingerprint) and the registers ptxas reports for the point on its
// architecture today. `qtune static --against STORE` prints it; the calibration tests hold it on the GPU runs'
// stores (tests/tuner/data/). A prediction is only as honest as this comparison says.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "device/api/device_fingerprint.h"
#include "device/jit/compile_service.h"
#include "kernels_src/registry/family.h"

namespace qt::tune {

struct CalibrationPoint {
  std::string device;  // the GPU's name, as its fingerprint gives it
  std::string family;  // the registry's name (the store's "cuda." prefix dropped)
  kernels::Shape shape;
  kernels::Point point;
  double measured_s = 0, model_s = 0;
  std::string bound;            // the model's: "memory", "compute" or "launch"
  bool current_source = true;   // measured on today's source of the family (a report's rows: not known to be)
  // A report's "in a chain" row: per launch of launches back to back, predicted with the in-stream launch cost
  // (GpuPeaks::stream_launch_us) where a launch timed alone gets launch_us.
  bool in_chain = false;
  int64_t rows() const;         // the shape's M, 0 where it has none
};

struct Calibration {
  std::vector<CalibrationPoint> points;
  std::map<std::string, size_t> skipped;  // why a verified row has no prediction -> how many
};

// Every ok row of a GPU in the tuning store at `path` (read without changing the file), or every kernel row of a
// `qbench --report` JSON whose variant names a family's point, of the families named in `families` (empty:
// every device family the registry knows). Throws qt::Error (exit 2) for a file that is neither.
Calibration calibrate_store(const std::string& path, const std::vector<std::string>& families,
                            compile::CompileService& service);

struct CalibrationFit {
  size_t n = 0;
  double spearman = 0;      // rank correlation of model and measured times (NaN under 3 points)
  double median_error = 0;  // median of |model - measured| / measured
  double median_ratio = 0;  // median of model / measured: under 1, the model is optimistic
};
CalibrationFit fit(const std::vector<const CalibrationPoint*>& points);

}  // namespace qt::tune
