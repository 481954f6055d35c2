#include "models/synthetic/random_weights.h"

namespace qt::synthetic {

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t tensor_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return splitmix64_mix(seed ^ splitmix64_mix(h));
}

namespace {

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
// Standard deviation of a sum of four independent uniforms on {0..65535}: sqrt(4 * (65536^2 - 1) / 12).
constexpr double kSumStd = 37837.22644352;
constexpr int32_t kSumMean = 131070;

bool is_norm(const std::string& name) {
  const std::string suffix = "norm.weight";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void generate_values(uint64_t seed, const std::string& name, uint64_t first, uint64_t count, float* out) {
  const uint64_t key = tensor_key(seed, name);
  const bool norm = is_norm(name);
  const float scale = static_cast<float>((norm ? 0.05 : 0.02) / kSumStd);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t r = splitmix64_mix(key + (first + i + 1) * kGamma);
    const int32_t s = static_cast<int32_t>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48)) - kSumMean;
    const float z = static_cast<float>(s) * scale;  // |s| < 2^24: the int -> float conversion is exact
    out[i] = norm ? 1.0f + z : z;
  }
}

}  // namespace qt::synthetic
