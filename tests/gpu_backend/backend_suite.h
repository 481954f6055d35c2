#pragma once
// The device backend's end-to-end checks, written once and run on the emulator (label gpu-backend) and on a
// CUDA GPU (label gpu). Each compares the device backend (fp16 activations, kernel families) with the CPU
// reference path (fp32, dequantized weights, double accumulation) on the transformers golden model files.
#include <functional>
#include <memory>
#include <string>

#include "device/api/device.h"

namespace qt::test {

using DeviceFactory = std::function<std::unique_ptr<dev::Device>()>;

// Golden dense files: dense and dense-tied in ajc1 (Q8_0) and ak48 (AWQ, fp16 embedding and lm_head).
void check_golden_logits(const DeviceFactory& make, const std::string& file);
void check_greedy_tokens(const DeviceFactory& make, const std::string& file);
void check_multi_turn(const DeviceFactory& make, const std::string& file);
void check_long_prompt(const DeviceFactory& make, const std::string& file);
void check_full_context(const DeviceFactory& make, const std::string& file);

}  // namespace qt::test
