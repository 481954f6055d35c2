#pragma once
// Kernel Tuner cache files (.json, or .json.gz): {device_name, kernel_name, problem_size,
// tune_params_keys, tune_params, cache: {"v1,...": {params..., time (ms or failure string), times[],
// compile_time, verification_time, benchmark_time, framework_time (ms)}}}. A file cut short by an
// interrupted run is repaired the way Kernel Tuner does it (closing the open objects).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tuner/core/space.h"
#include "common/result_status.h"

namespace qt::tune {

struct RecordedPoint {
  Status status = Status::Ok;
  double time_ms = 0;
  std::vector<double> times_ms;
  double compile_ms = 0, verification_ms = 0, benchmark_ms = 0, framework_ms = 0;
  std::string failure;  // Kernel Tuner's failure string, if any
};

struct RecordedSpace {
  std::string device_name, kernel_name;
  nlohmann::json problem_size;
  std::vector<int64_t> problem_shape;  // problem_size validated: sizes in 0..2^53
  std::string content_sha256;          // of the cache's text, so a re-import is recognised
  Space space{{}};
  std::vector<RecordedPoint> points;  // indexed by PointId
  PointId optimum = 0;
  double optimum_ms = 0;
  size_t failures = 0;
};

// Decompressed size above which a cache is refused (the largest recorded space is a few MiB).
constexpr size_t kMaxCacheBytes = size_t(256) << 20;

// Reads a whole file, gunzipping when it starts with the gzip magic, up to kMaxCacheBytes. Throws qt::Error
// naming the path.
std::string read_maybe_gzip(const std::string& path, size_t max_bytes = kMaxCacheBytes);

// Parses a Kernel Tuner cache; throws qt::Error naming the path and the bad field. Python's NaN / Infinity
// as a time (or a repetition's time) make that point a failure.
RecordedSpace load_kt_cache(const std::string& path);
RecordedSpace parse_kt_cache(const std::string& text, const std::string& source);

Status kt_failure_status(const std::string& failure);

}  // namespace qt::tune
