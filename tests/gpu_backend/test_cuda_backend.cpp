// The same end-to-end checks as test_emu_backend.cpp on a CUDA GPU (label gpu). Without a usable driver each
// case reports itself skipped, with the reason, and never passes.
#include <catch2/catch.hpp>

#include "device/cuda/cuda_device.h"
#include "tests/gpu_backend/backend_suite.h"
#include "tests/skip.h"

namespace {

std::unique_ptr<qt::dev::Device> gpu() { return std::make_unique<qt::cuda::CudaDevice>(); }

#define NEED_GPU()                                                                                  \
  do {                                                                                              \
    if (!qt::cuda::cuda_available()) QTUNE_SKIP("no CUDA GPU: " + qt::cuda::cuda_unavailable_reason()); \
  } while (false)

}  // namespace

TEST_CASE("cuda: Q8_0 and AWQ golden models give the CPU reference's logits within the fp16 tolerance") {
  NEED_GPU();
  for (const char* file : {"dense.ajc1", "dense.ak48", "dense-tied.ajc1", "dense-tied.ak48"}) {
    INFO(file);
    qt::test::check_golden_logits(gpu, file);
  }
}

TEST_CASE("cuda: predequantized weights on cuBLASLt give the CPU reference's logits and greedy tokens") {
  NEED_GPU();
  for (const char* file : {"dense.ak48", "dense.ajc1"}) {
    INFO(file);
    qt::test::check_predequantized(gpu, file, true);
  }
}

TEST_CASE("cuda: greedy decoding gives the CPU reference's 16 tokens, later steps replayed from a graph") {
  NEED_GPU();
  for (const char* file : {"dense.ajc1", "dense.ak48"}) {
    INFO(file);
    qt::test::check_greedy_tokens(gpu, file);
  }
}

TEST_CASE("cuda: q, k and v as one launch per layer at decode where stored concatenated, three where not") {
  NEED_GPU();
  using Storage = qt::rt::DeviceWeights::Storage;
  qt::test::check_concatenated_qkv(gpu, "dense.ajc1", true, Storage::kFile);
  qt::test::check_concatenated_qkv(gpu, "dense-tied.ak48", true);
  qt::test::check_concatenated_qkv(gpu, "dense-tied.ajc1", true);
  qt::test::check_concatenated_qkv(gpu, "dense.ak48", true, Storage::kF16);
  qt::test::check_concatenated_qkv(gpu, "dense.ak48", false);
  qt::test::check_concatenated_qkv(gpu, "dense.ajc1", false);
  qt::test::check_qkv_types_differ(gpu, "dense.ajc1");
}

TEST_CASE("cuda: Qwen3-MoE golden models give the CPU reference's logits and match the transformers goldens") {
  NEED_GPU();
  for (const char* file : {"moe-norm.q8_0.moe3", "moe-norm.int8-sym.moe3", "moe-norm.int8-asym.moe3",
                           "moe-norm.awq.moe3", "moe-nonorm.q8_0.moe3"}) {
    INFO(file);
    qt::test::check_golden_logits(gpu, file);
  }
  qt::test::check_moe_transformers_goldens(gpu);
  qt::test::check_moe_transformers_goldens(gpu, true);
  qt::test::check_greedy_tokens(gpu, "moe-norm.awq.moe3");
}

TEST_CASE("cuda: a second turn continues on the kept KV cache") {
  NEED_GPU();
  qt::test::check_multi_turn(gpu, "dense-tied.ajc1");
}

TEST_CASE("cuda: a prompt longer than one prefill chunk") {
  NEED_GPU();
  qt::test::check_long_prompt(gpu, "dense.ak48");
}

TEST_CASE("cuda: a context that fills up decodes its last row and then refuses more") {
  NEED_GPU();
  qt::test::check_full_context(gpu, "dense.ajc1");
}
