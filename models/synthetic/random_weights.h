#pragma once
// Deterministic random weights: the value of element i of tensor `name` depends only on (seed, name, i),
// computed with integer hashing and one or two IEEE float operations, so every machine and every output
// format (HF safetensors or a model file) sees the same numbers, and a tensor can be generated in any order
// or in pieces.
#include <cstdint>
#include <string>

namespace qt::synthetic {

uint64_t splitmix64_mix(uint64_t z);
uint64_t tensor_key(uint64_t seed, const std::string& name);

// Approximately N(0, std) (Irwin-Hall sum of four 16-bit uniforms, bounded at about +-3.5 std).
// Norm weights (names ending in "norm.weight") are 1 + N(0, 0.05); everything else N(0, 0.02).
void generate_values(uint64_t seed, const std::string& name, uint64_t first, uint64_t count, float* out);

}  // namespace qt::synthetic
