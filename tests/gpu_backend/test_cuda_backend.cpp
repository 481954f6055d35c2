// The same end-to-end checks as test_emu_backend.cpp on a CUDA GPU (label gpu). Without a usable driver each
// case reports itself skipped, with the reason, and never passes.
#include <catch2/catch.hpp>

#include "device/cuda/cuda_device.h"
#include "kernels_src/registry/registry.h"
#include "tests/gpu_backend/backend_suite.h"
#include "tests/skip.h"
#include "tests/tuner/scratch_path.h"
#include "tuner/store/store.h"

namespace {

std::unique_ptr<qt::dev::Device> gpu() { return std::make_unique<qt::cuda::CudaDevice>(); }

// A store whose dispatch ranks the baseline first in the one bucket that serves every batch, at each shape.
std::shared_ptr<const qt::winners::WinnersTable> baseline_first(qt::dev::Device& d, const std::string& store_prefix,
                                                                const qt::blas::Baseline& row,
                                                                const std::vector<qt::kernels::Shape>& shapes) {
  REQUIRE(!shapes.empty());
  const std::string path = qt::test::tuner_scratch(std::string("cuda-backend-") + row.store_name, ".sqlite");
  const qt::winners::DeviceFingerprint fp = d.store_fingerprint();
  const qt::kernels::KernelFamily& problem = qt::kernels::find_family(row.problem_family);
  const std::string name = store_prefix + row.store_name;
  {
    qt::tune::Store store(path);
    // A store names its device by the results it holds: the baseline's own, at its heuristic's first choice.
    qt::tune::ResultRow r;
    r.device = fp;
    r.family = name;
    r.source_hash = "cublaslt-" + std::to_string(qt::blas::blas_lt_version());
    r.dtypes = problem.dtypes;
    r.shape = shapes.front().values;
    r.point = nlohmann::json{{"rank", 0}};
    r.stats = qt::summarize({1e-6});
    store.put(r);
    for (const qt::kernels::Shape& s : shapes)
      store.put_dispatch(fp, problem.op, qt::weight_type_name(row.weight_type), {s.values.begin() + 1, s.values.end()},
                         {{4096, {{name, 1e-6}}}}, "test");
  }
  return std::make_shared<qt::winners::WinnersTable>(path);
}

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

TEST_CASE("cuda: without a tuned store prompts of 64 rows and more run quantized linears on dequant + cuBLASLt") {
  NEED_GPU();
  for (const char* file : {"dense.ak48", "dense.ajc1"}) {
    INFO(file);
    qt::test::check_default_route(gpu, file);
  }
}

TEST_CASE("cuda: a dispatch ranking dequant + cuBLASLt first runs Q8_0 and AWQ (frag and file layout) linears on "
          "it, with the reference's logits") {
  NEED_GPU();
  for (const auto& [file, baseline] : std::vector<std::pair<std::string, std::string>>{
           {"dense.ajc1", qt::blas::kStoreNameQ8_0Dequant},      // the file layout
           {"dense.ajc1", qt::blas::kStoreNameQ8_0FragDequant},  // the frag layout, the runtime's default
           {"dense.ak48", qt::blas::kStoreNameAwqFragDequant},  // the frag layout, the runtime's default
           {"dense.ak48", qt::blas::kStoreNameAwqDequant}}) {   // the file layout
    INFO(file << " through " << baseline);
    qt::test::check_baseline_dispatch(gpu, file, baseline, baseline_first);
  }
}

TEST_CASE("cuda: greedy decoding gives the CPU reference's 16 tokens, later steps replayed from a graph") {
  NEED_GPU();
  for (const char* file : {"dense.ajc1", "dense.ak48"}) {
    INFO(file);
    qt::test::check_greedy_tokens(gpu, file);
  }
}

TEST_CASE("cuda: with programmatic dependent launch every kernel waits for the one before it: the goldens hold") {
  NEED_GPU();
  if (gpu()->arch() < 90) {
    std::string why;
    qt::cuda::CudaDevice d;
    CHECK(!d.set_programmatic_launch(true, &why));
    CHECK(why.find("sm_90") != std::string::npos);
    QTUNE_SKIP("programmatic dependent launch needs sm_90; this GPU is sm_" + std::to_string(d.arch()));
  }
  // Every kernel launched with programmatic stream serialization: a kernel that read its input before the
  // previous one finished writing it would break the logits, the greedy tokens or the MoE routing.
  auto pdl = [] {
    auto d = std::make_unique<qt::cuda::CudaDevice>();
    REQUIRE(d->set_programmatic_launch(true));
    return std::unique_ptr<qt::dev::Device>(std::move(d));
  };
  for (const char* file : {"dense.ajc1", "dense.ak48", "moe-norm.awq.moe3"}) {
    INFO(file);
    qt::test::check_golden_logits(pdl, file);
    qt::test::check_greedy_tokens(pdl, file);
  }
  qt::test::check_long_prompt(pdl, "dense.ak48");
  qt::test::check_frag_experts(pdl, "moe-norm.q8_0.moe3");
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

TEST_CASE("cuda: gate, up and SwiGLU as one launch per layer where the frag layout stores [w1; w3], apart where not") {
  NEED_GPU();
  qt::test::check_concatenated_gate_up(gpu, "dense-tied.ak48", true);
  qt::test::check_concatenated_gate_up(gpu, "dense.ajc1", false);
}

TEST_CASE("cuda: with fused norms a decode step runs no norm or rope launch per layer and gives the CPU reference tokens") {
  NEED_GPU();
  qt::test::check_fused_norm(gpu, "dense-tied.ak48", true);
  qt::test::check_fused_norm(gpu, "moe-norm.awq.moe3", false);
  qt::test::check_fused_norm(gpu, qt::test::write_fusable_moe_model(), true);  // MoE: the attention side
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

TEST_CASE("cuda: MoE experts in the frag layout on the wgmma grouped GEMMs give the CPU reference logits") {
  NEED_GPU();
  if (gpu()->arch() < 90) QTUNE_SKIP("the wgmma grouped GEMMs need sm_90; this GPU is sm_" + std::to_string(gpu()->arch()));
  for (const char* file : {"moe-norm.q8_0.moe3", "moe-norm.int8-sym.moe3", "moe-norm.awq.moe3"}) {
    INFO(file);
    qt::test::check_frag_experts(gpu, file);
  }
}

TEST_CASE("cuda: with fused norms a MoE decode step runs its frag-layout experts as two routed GEMVs") {
  NEED_GPU();
  if (gpu()->arch() < 90) QTUNE_SKIP("frag-layout experts need sm_90; this GPU is sm_" + std::to_string(gpu()->arch()));
  qt::test::check_moe_stream(gpu, qt::test::write_fusable_moe_model());
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
