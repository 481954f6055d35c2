#include "device/winners/dispatch.h"

#include <algorithm>

#include "common/error.h"

namespace qt::winners {

bool is_decode_variant_name(const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  const std::string rest = name.substr(dot + 1);
  const bool cpu = name.compare(0, dot, "cpu") == 0;
  for (const char* v : kDecodeVariants)
    if (!cpu && rest == std::string(kDecodeVariantStem) + v) return true;
  for (const char* v : kCpuDecodeVariants)
    if (cpu && rest == std::string(kDecodeVariantStem) + v) return true;
  return false;
}

std::vector<int64_t> default_batch_buckets() {
  std::vector<int64_t> b;
  for (int64_t m = 1; m <= 4096; m *= 2) b.push_back(m);
  return b;
}

std::vector<Crossover> crossovers(std::vector<DispatchEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.bucket < b.bucket; });
  std::vector<Crossover> out;
  std::string leader;
  for (const DispatchEntry& e : entries) {
    if (e.ranking.empty()) continue;
    const std::string& top = e.ranking.front().family;
    if (!leader.empty() && top != leader) out.push_back({e.bucket, leader, top});
    leader = top;
  }
  return out;
}

int64_t bucket_for(const std::vector<int64_t>& buckets, int64_t m) {
  if (buckets.empty()) throw Error("no batch bucket to choose from", kExitFailure);
  int64_t best = -1, largest = buckets.front();
  for (int64_t b : buckets) {
    largest = std::max(largest, b);
    if (b >= m && (best < 0 || b < best)) best = b;
  }
  return best < 0 ? largest : best;
}

}  // namespace qt::winners
