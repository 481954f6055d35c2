#pragma once
// Helpers of the converter tests: scratch folders, raw file bytes, and reference encodings of the brief's
// quantization rules written from the rules themselves (not from models/quant), so the tests check the
// converter and the writers against the specification.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/half.h"

namespace qt::test {

inline std::filesystem::path convert_scratch(const std::string& name) {
  std::filesystem::path dir = std::filesystem::current_path() / "convert-scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::vector<uint8_t> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void put_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Q8_0 of qwen3.c: groups of G consecutive elements; scale = amax / 127; q = rint(w / scale).
struct RefQ8 {
  std::vector<int8_t> q;
  std::vector<float> scales;
};
inline RefQ8 ref_q8_0(const std::vector<float>& w, int32_t G) {
  RefQ8 r;
  r.q.resize(w.size());
  for (size_t g = 0; g < w.size() / G; ++g) {
    float amax = 0;
    for (int32_t i = 0; i < G; ++i) amax = std::max(amax, std::fabs(w[g * G + i]));
    const float s = amax / 127.0f;
    r.scales.push_back(s);
    for (int32_t i = 0; i < G; ++i) r.q[g * G + i] = static_cast<int8_t>(s == 0 ? 0 : std::rint(w[g * G + i] / s));
  }
  return r;
}

// INT8 group-wise, per output column n and groups of G along K; storage in-major [K][N] with +128.
struct RefInt8 {
  std::vector<uint8_t> q;              // [K][N]
  std::vector<uint16_t> scales, zeros;  // [K/G][N]
};
inline RefInt8 ref_int8_gw(const std::vector<float>& w, int64_t N, int64_t K, int32_t G, bool asym) {
  RefInt8 r;
  r.q.resize(static_cast<size_t>(N * K));
  r.scales.resize(static_cast<size_t>(N * K / G));
  if (asym) r.zeros.resize(r.scales.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < K / G; ++g) {
      float mn = w[n * K + g * G], mx = mn, amax = 0;
      for (int64_t k = g * G; k < (g + 1) * G; ++k) {
        mn = std::min(mn, w[n * K + k]);
        mx = std::max(mx, w[n * K + k]);
        amax = std::max(amax, std::fabs(w[n * K + k]));
      }
      const uint16_t sb = float_to_half_bits(asym ? (mx - mn) / 255.0f : amax / 127.0f);
      const float s = half_bits_to_float(sb);
      r.scales[g * N + n] = sb;
      float z = 0;
      if (asym) {
        r.zeros[g * N + n] = float_to_half_bits(mn + 128.0f * s);
        z = half_bits_to_float(r.zeros[g * N + n]);
      }
      for (int64_t k = g * G; k < (g + 1) * G; ++k) {
        float q = 0;
        if (s != 0) q = asym ? std::clamp(std::rint((w[n * K + k] - z) / s), -128.0f, 127.0f)
                             : std::clamp(std::rint(w[n * K + k] / s), -127.0f, 127.0f);
        r.q[k * N + n] = static_cast<uint8_t>(static_cast<int>(q) + 128);
      }
    }
  return r;
}

// AWQ INT4 round-to-nearest with zero point, AutoAWQ GEMM packing.
struct RefAwq {
  std::vector<int32_t> qweight, qzeros;  // [K][N/8], [K/G][N/8]
  std::vector<uint16_t> scales;          // [K/G][N]
};
inline RefAwq ref_awq(const std::vector<float>& w, int64_t N, int64_t K, int32_t G) {
  static constexpr int kOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  RefAwq r;
  r.qweight.assign(static_cast<size_t>(K * N / 8), 0);
  r.qzeros.assign(static_cast<size_t>(K / G * N / 8), 0);
  r.scales.resize(static_cast<size_t>(K / G * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < K / G; ++g) {
      float mn = w[n * K + g * G], mx = mn;
      for (int64_t k = g * G; k < (g + 1) * G; ++k) {
        mn = std::min(mn, w[n * K + k]);
        mx = std::max(mx, w[n * K + k]);
      }
      const uint16_t sb = float_to_half_bits(std::max(mx - mn, 1e-5f) / 15.0f);
      const float s = half_bits_to_float(sb);
      const float zero = std::clamp(std::rint(-mn / s), 0.0f, 15.0f);
      r.scales[g * N + n] = sb;
      const int shift = 4 * kOrder[n % 8];
      r.qzeros[g * (N / 8) + n / 8] |= static_cast<int32_t>(static_cast<uint32_t>(zero) << shift);
      for (int64_t k = g * G; k < (g + 1) * G; ++k) {
        const float q = std::clamp(std::rint(w[n * K + k] / s) + zero, 0.0f, 15.0f);
        r.qweight[k * (N / 8) + n / 8] |= static_cast<int32_t>(static_cast<uint32_t>(q) << shift);
      }
    }
  return r;
}

template <class T>
bool same_array(const T* a, const std::vector<T>& b) {
  return a != nullptr && std::memcmp(a, b.data(), b.size() * sizeof(T)) == 0;
}

}  // namespace qt::test
