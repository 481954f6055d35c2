#pragma once
// What qbench --report measures, as the JSON pieces runtime/report/bench_report.h renders:
//   kernels:    every linear shape of a model at each batch bucket, for the tuned point, the default point,
//               each other family serving the op at that M on the device at its default point ("<family>
//               default"), our dequant kernel + cuBLASLt and FP16 cuBLASLt (device), or tuned vs default CPU
//               matvec (cpu);
//   bandwidth:  a copy kernel (device) or the STREAM-like read (cpu), in the same run;
//   end to end: prefill at each prompt length and decode after the first prompt, per model variant.
// Device times are CUDA events around the work with the L2 flushed between repetitions, the median kept.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/api/device.h"
#include "device/winners/winners.h"
#include "models/core/weights.h"
#include "runtime/core/backend.h"

namespace qt::rt {

struct KernelBenchOptions {
  std::vector<int64_t> buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  int min_reps = 10;          // timed repetitions at least (1 on the emulator, whose time means nothing)
  double min_seconds = 0.05;  // and at least this long in total
  std::string tuned_cache;    // "" = none: tuned falls back to the default
};

// The device's copy bandwidth in GB/s (bytes read + bytes written over the time), and how it was measured.
struct DeviceBandwidth {
  double gbps = 0;
  std::string method;
};
DeviceBandwidth measure_device_bandwidth(dev::Device& device, uint64_t bytes);

// "kernels" entries for a device (emu or cuda). `fingerprint` and `store_prefix` find tuned winners.
nlohmann::json bench_device_kernels(dev::Device& device, const ModelWeights& weights, const std::string& store_prefix,
                                    const KernelBenchOptions& options);
// "kernels" entries for this CPU: each quantized matvec shape at M = 1, tuned vs default point.
nlohmann::json bench_cpu_kernels(const ModelWeights& weights, const KernelBenchOptions& options);

// A benchmark's prompt of `n` tokens: ids spread over the vocabulary, the same in every measurement.
std::vector<int32_t> benchmark_prompt(int64_t n, int64_t vocab);
// The id fed at decode step `i` of a benchmark that samples nothing.
inline int32_t benchmark_decode_token(int64_t i, int64_t vocab) { return int32_t((i * 104729 + 7) % vocab); }

struct EndToEndOptions {
  std::vector<int64_t> prompts = {128, 512};
  int64_t decode_steps = 128;  // after the first prompt
  int repeat = 2;              // best of
};
// One "end_to_end" entry: the model on `backend`, named `name`. `memory_mb` is what the caller measured
// (device weight bytes, or the process's peak RSS on the CPU); `decode_bytes` the bytes a decode step reads.
nlohmann::json bench_end_to_end(const std::string& name, const std::string& model_path, const ModelWeights& weights,
                                Backend& backend, const EndToEndOptions& options,
                                const std::function<double()>& memory_mb, uint64_t decode_bytes);

// Weight bytes one decode step reads when the dense linear weights are fp16 (qrun --predequantize).
uint64_t predequantized_decode_bytes(const ModelWeights& weights, uint64_t quantized_decode_bytes);

}  // namespace qt::rt
