#pragma once
// Shared helpers of the formats tests: deterministic random weights, scratch paths, small configs, and
// an independent encoding of every quantization rule (written from the brief, not from models/quant).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "models/core/model_config.h"
#include "models/core/weights.h"
#include "models/formats/model_writer.h"

namespace qt::test {

// Deterministic floats in [-scale, scale] (mt19937 is specified bit-exactly by the standard).
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) {
    const float u = static_cast<float>(rng() >> 8) / static_cast<float>(1u << 24);  // [0, 1)
    x = (2.0f * u - 1.0f) * scale;
  }
  return v;
}

// A fresh scratch directory per test case under the build tree (tests run with the build dir as cwd).
inline std::filesystem::path scratch_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::current_path() / "formats-scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A small dense Qwen3 with GQA and head_dim != dim / n_heads.
inline ModelConfig tiny_dense() {
  ModelConfig c;
  c.arch = ModelArch::Qwen3Dense;
  c.dim = 64;
  c.hidden_dim = 192;
  c.n_layers = 2;
  c.n_heads = 6;
  c.n_kv_heads = 2;
  c.vocab_size = 40;
  c.max_seq_len = 128;
  c.head_dim = 32;  // != dim / n_heads
  c.shared_classifier = true;
  return c;
}

inline ModelConfig tiny_moe() {
  ModelConfig c = tiny_dense();
  c.arch = ModelArch::Qwen3Moe;
  c.hidden_dim = 128;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.norm_topk_prob = true;
  return c;
}

// Seed of a tensor, from its name, so the test can regenerate exactly what it supplied.
inline uint32_t seed_of(const std::string& name) {
  uint32_t h = 2166136261u;
  for (unsigned char ch : name) h = (h ^ ch) * 16777619u;
  return h;
}

inline std::vector<float> tensor_values(const TensorSlot& s) {
  // Norms near 1 like real RMSNorm weights; matrices small and signed.
  std::vector<float> v = random_floats(static_cast<size_t>(s.rows * s.cols), seed_of(s.hf_name), 0.5f);
  if (s.rows == 1) {
    for (float& x : v) x += 1.0f;
  }
  return v;
}

// Writes every slot of the plan with tensor_values().
inline void write_model(const std::string& path, const WriterOptions& o) {
  auto w = ModelWriter::create(path, o);
  for (const TensorSlot& s : w->plan()) {
    const std::vector<float> v = tensor_values(s);
    w->write_float(s, v.data());
  }
  w->finish();
}

// ---- Independent reference of the quantization rules: dequantized value of every element [N][K]. ----

// Through an int so a rounded -0.0 becomes the stored integer 0, as in the file.
inline float rne(float x) { return static_cast<float>(static_cast<int>(std::nearbyint(x))); }
inline float f16(float x) { return half_bits_to_float(float_to_half_bits(x)); }

inline std::vector<float> ref_q8_0(const std::vector<float>& w, int64_t group) {
  std::vector<float> out(w.size());
  for (size_t g0 = 0; g0 < w.size(); g0 += static_cast<size_t>(group)) {
    float amax = 0.0f;
    for (size_t i = g0; i < g0 + static_cast<size_t>(group); ++i) amax = std::max(amax, std::fabs(w[i]));
    const float scale = amax / 127.0f;
    for (size_t i = g0; i < g0 + static_cast<size_t>(group); ++i) {
      const float q = scale == 0.0f ? 0.0f : rne(w[i] / scale);
      out[i] = q * scale;
    }
  }
  return out;
}

inline std::vector<float> ref_int8_gw(const std::vector<float>& w, int64_t N, int64_t K, int64_t G, bool asym) {
  std::vector<float> out(w.size());
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k0 = 0; k0 < K; k0 += G) {
      const float* g = &w[static_cast<size_t>(n * K + k0)];
      float amax = 0, mn = g[0], mx = g[0];
      for (int64_t i = 0; i < G; ++i) {
        amax = std::max(amax, std::fabs(g[i]));
        mn = std::min(mn, g[i]);
        mx = std::max(mx, g[i]);
      }
      for (int64_t i = 0; i < G; ++i) {
        float v;
        if (!asym) {
          const float s = f16(amax / 127.0f);
          const float q = s == 0 ? 0.0f : std::clamp(rne(g[i] / s), -127.0f, 127.0f);
          v = q * s;
        } else {
          const float s = f16((mx - mn) / 255.0f);
          const float z = f16(mn + 128.0f * s);
          const float q = s == 0 ? 0.0f : std::clamp(rne((g[i] - z) / s), -128.0f, 127.0f);
          v = q * s + z;
        }
        out[static_cast<size_t>(n * K + k0 + i)] = v;
      }
    }
  }
  return out;
}

inline std::vector<float> ref_awq_rtn(const std::vector<float>& w, int64_t N, int64_t K, int64_t G) {
  std::vector<float> out(w.size());
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k0 = 0; k0 < K; k0 += G) {
      const float* g = &w[static_cast<size_t>(n * K + k0)];
      float mn = g[0], mx = g[0];
      for (int64_t i = 0; i < G; ++i) {
        mn = std::min(mn, g[i]);
        mx = std::max(mx, g[i]);
      }
      const float s = f16(std::max(mx - mn, 1e-5f) / 15.0f);
      const float zero = std::clamp(rne(-mn / s), 0.0f, 15.0f);
      for (int64_t i = 0; i < G; ++i) {
        const float q = std::clamp(rne(g[i] / s) + zero, 0.0f, 15.0f);
        out[static_cast<size_t>(n * K + k0 + i)] = (q - zero) * s;
      }
    }
  }
  return out;
}

// Expected dequantized values of a tensor of `type` supplied as floats.
inline std::vector<float> ref_dequant(const std::vector<float>& w, int64_t N, int64_t K, WeightType type, int64_t G) {
  switch (type) {
    case WeightType::F32: return w;
    case WeightType::F16: {
      std::vector<float> o(w.size());
      for (size_t i = 0; i < w.size(); ++i) o[i] = f16(w[i]);
      return o;
    }
    case WeightType::BF16: {
      std::vector<float> o(w.size());
      for (size_t i = 0; i < w.size(); ++i) o[i] = bf16_bits_to_float(float_to_bf16_bits(w[i]));
      return o;
    }
    case WeightType::Q8_0: return ref_q8_0(w, G);
    case WeightType::INT8_GW_SYM: return ref_int8_gw(w, N, K, G, false);
    case WeightType::INT8_GW_ASYM: return ref_int8_gw(w, N, K, G, true);
    case WeightType::AWQ_INT4: return ref_awq_rtn(w, N, K, G);
  }
  return {};
}

}  // namespace qt::test
