#pragma once
// Small Qwen3 / Qwen3-MoE weights built in memory with the project's quantizers, for tests that need a
// model without going through a file.
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "models/core/weights.h"
#include "models/quant/quantized_tensor.h"
#include "runtime/cpu/cpu_backend.h"

namespace qt::test {

struct RandomModelSpec {
  ModelConfig config;
  WeightType linear_type = WeightType::F32;  // attention and dense MLP projections
  WeightType expert_type = WeightType::F32;  // MoE experts
  WeightType embed_type = WeightType::F32;   // embedding and classifier
  int32_t group_size = 32;
  uint64_t seed = 1;
};

struct RandomModel {
  ModelWeights weights;
  std::vector<std::unique_ptr<quant::QuantizedTensor>> storage;
  std::vector<std::vector<uint8_t>> stacks;  // expert blocks, [E] x one array each
};

std::unique_ptr<RandomModel> make_random_model(const RandomModelSpec& spec);

// A dense or MoE config with the given sizes; head_dim 16, theta 1e4 so rotations vary within short prompts.
ModelConfig small_config(bool moe, int32_t n_layers = 2);

// Every instruction set this CPU runs, scalar first: the SIMD kernels are each checked on the ones present.
inline std::vector<rt::Isa> available_isas() {
  std::vector<rt::Isa> out;
  for (rt::Isa isa : rt::kAllIsas)
    if (rt::isa_supported(isa)) out.push_back(isa);
  return out;
}

inline rt::CpuOptions cpu_options(bool reference, int threads, std::optional<rt::Isa> isa = std::nullopt) {
  rt::CpuOptions o;
  o.reference = reference;
  o.threads = threads;
  o.isa = isa;
  return o;
}

// Uniform values in [-a, a].
std::vector<float> random_values(std::mt19937_64& rng, size_t n, float a);

}  // namespace qt::test
