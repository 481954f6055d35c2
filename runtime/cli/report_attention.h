#pragma once
// qbench --report's attention rows (issue 26, item 4): flash-decoding (op attention_decode) of one query token
// over the model's KV cache at long contexts, measured the way the linear rows are (device_timer.h).
//   shape:     the model's heads, KV heads and head dim; the cache holds exactly `context` rows and the query
//              is the last of them (P = context - 1), as a decode step at that position runs;
//   choice:    per power-of-two context bucket, as DeviceBackend::attention chooses;
//   variants:  the tuned choice (the --tuned-cache store), the default point, and the fastest split count at any
//              default point's other parameters (threads, tile, stages): how far the split count, the one
//              parameter the context scales, takes each of the kernels CI verifies;
//   bytes:     the K and V rows of the context plus q and the output: a variant's GB/s is its KV read rate.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/api/device.h"
#include "models/core/weights.h"
#include "runtime/cli/report_measure.h"

namespace qt::rt {

// The contexts qbench --report measures unless --attention-contexts says otherwise: a GPU's 4K and 32K (the
// issue's goal), the emulator's 64 (its times mean nothing; the rows prove the path).
std::vector<int64_t> default_attention_contexts(bool emulator);

// The report's "attention_decode" object, {"method": text, "rows": [...]} (runtime/report/report_json.h).
nlohmann::json bench_attention_decode(dev::Device& device, const ModelWeights& weights, const std::string& store_prefix,
                                      const KernelBenchOptions& options, const std::vector<int64_t>& contexts);

}  // namespace qt::rt
