// Dispatch by batch size learned per shape: the crossovers stored by the tuner make the device backend's
// kernel choice pick the family measured fastest in the bucket of each batch.
#include <catch2/catch.hpp>

#include "kernels_src/registry/registry.h"
#include "runtime/gpu/device_backend.h"
#include "runtime/gpu/kernel_choice.h"
#include "tests/tuner/scratch_path.h"
#include "tuner/store/store.h"

using namespace qt;
using namespace qt::tune;

namespace {

const std::vector<int64_t> kRest = {1024, 4096, 128};  // N, K, G

ResultRow winner_row(const winners::DeviceFingerprint& dev, const std::string& family, int64_t m, double s) {
  const kernels::KernelFamily& f = kernels::find_family(family);
  ResultRow r;
  r.device = dev;
  r.family = "emu." + family;
  r.source_hash = f.source_hash;
  r.dtypes = f.dtypes;
  r.shape = {m, kRest[0], kRest[1], kRest[2]};
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [k, v] : f.default_point()) p[k] = v;
  r.point = p;
  r.stats = summarize({s});
  return r;
}

}  // namespace

TEST_CASE("crossovers are the batch sizes where the fastest family changes", "[tuner][dispatch]") {
  using winners::DispatchEntry;
  const std::vector<DispatchEntry> e = {{8, {{"gemm", 1.0}, {"gemv", 2.0}}},
                                        {1, {{"gemv", 1.0}, {"gemm", 3.0}}},
                                        {4, {{"gemv", 1.0}}},
                                        {4096, {{"blas", 1.0}, {"gemm", 1.1}}}};
  const auto c = winners::crossovers(e);
  REQUIRE(c.size() == 2);
  REQUIRE(c[0].m == 8);
  REQUIRE(c[0].below == "gemv");
  REQUIRE(c[0].above == "gemm");
  REQUIRE(c[1].m == 4096);
  REQUIRE(c[1].above == "blas");
  REQUIRE(winners::bucket_for({1, 4, 8, 4096}, 5) == 8);
  REQUIRE(winners::bucket_for({1, 4, 8, 4096}, 4) == 4);
  REQUIRE(winners::bucket_for({1, 4, 8, 4096}, 9000) == 4096);
}

TEST_CASE("a store with recorded crossovers makes the device backend pick the measured family per batch size",
          "[tuner][dispatch]") {
  const std::string path = test::tuner_scratch("dispatch", ".sqlite");
  const winners::DeviceFingerprint dev = winners::emu_fingerprint(80);
  {
    Store store(path);
    // Winners of both families at every bucket; the dispatch says the GEMV leads up to M=4, the GEMM from 8,
    // and an external dequant + BLAS path from 4096.
    for (int64_t m : {1, 4, 8, 4096}) {
      store.put(winner_row(dev, "awq_gemm", m, 1e-3));
      if (m <= 8) store.put(winner_row(dev, "awq_gemv", m, 2e-3));  // slower per row, but the dispatch decides
    }
    store.put_dispatch(dev, "linear", "AWQ_INT4", kRest,
                       {{1, {{"emu.awq_gemv", 1e-5}, {"emu.awq_gemm", 3e-5}}},
                        {4, {{"emu.awq_gemv", 2e-5}, {"emu.awq_gemm", 3e-5}}},
                        {8, {{"emu.awq_gemm", 3e-5}, {"emu.awq_gemv", 4e-5}}},
                        {4096, {{"emu.blas.dequant_f16", 1e-3}, {"emu.awq_gemm", 2e-3}}}},
                       "test");
  }
  auto table = std::make_shared<winners::WinnersTable>(path);
  const WeightType awq = WeightType::AWQ_INT4;
  const kernels::KernelFamily& gemm = kernels::find_family("awq_gemm");
  auto family_at = [&](rt::KernelChooser& ch, int64_t m) {
    const rt::KernelChoice& c = ch.choose("linear", &awq, kernels::Shape{gemm.dims, {m, kRest[0], kRest[1], kRest[2]}, ""});
    REQUIRE(c.dispatched);
    return c.family ? c.family->name : c.external;
  };
  rt::KernelChooser chooser(table, dev, "emu.", 80);
  CHECK(family_at(chooser, 1) == "awq_gemv");
  CHECK(family_at(chooser, 3) == "awq_gemv");  // bucket 4
  CHECK(family_at(chooser, 5) == "awq_gemm");  // bucket 8
  CHECK(family_at(chooser, 37) == "awq_gemm");
  CHECK(family_at(chooser, 4096) == "awq_gemm");  // the external leader is not run by this backend

  rt::KernelChooser with_blas(table, dev, "emu.", 80);
  with_blas.accept_external([](const std::string& name) { return name == "emu.blas.dequant_f16"; });
  CHECK(family_at(with_blas, 4096) == "emu.blas.dequant_f16");
  CHECK(family_at(with_blas, 1) == "awq_gemv");

  // Another device's dispatch is not this one's.
  rt::KernelChooser other(table, winners::emu_fingerprint(86), "emu.", 86);
  const rt::KernelChoice& c = other.choose("linear", &awq, kernels::Shape{gemm.dims, {1, kRest[0], kRest[1], kRest[2]}, ""});
  REQUIRE_FALSE(c.dispatched);
}

TEST_CASE("the device backend runs the dequant + cuBLASLt baselines a dispatch ranks first, on weights of their type "
          "and layout", "[tuner][dispatch]") {
  // Which store names the backend takes as its own baselines: this device's prefix and a row of the table.
  const blas::Baseline* int8 = rt::store_baseline("emu.int8gw_dequant_cublaslt", "emu.");
  const blas::Baseline* q8 = rt::store_baseline("emu.q8_0_dequant_cublaslt", "emu.");
  REQUIRE(int8);
  REQUIRE(q8);
  CHECK(int8->weight_type == WeightType::INT8_GW_SYM);
  CHECK(q8->weight_type == WeightType::Q8_0);
  CHECK(rt::store_baseline("cuda.q8_0_dequant_cublaslt", "emu.") == nullptr);  // another device's
  CHECK(rt::store_baseline("emu.blas.dequant_f16", "emu.") == nullptr);
  CHECK(rt::store_baseline("emu.q8_0_gemm", "emu.") == nullptr);

  // What it refuses to multiply: a weight of another type, or one held in another layout.
  rt::DeviceTensor frag_int8, file_int8, q8_0;
  frag_int8.type = file_int8.type = WeightType::INT8_GW_SYM;
  frag_int8.arrays = {{"bq", {}}, {"bs", {}}};
  file_int8.arrays = {{"q", {}}, {"scales", {}}};
  q8_0.type = WeightType::Q8_0;
  q8_0.arrays = {{"q", {}}, {"scales", {}}};
  CHECK(rt::baseline_refusal(*int8, frag_int8) == "");
  CHECK(rt::baseline_refusal(*q8, q8_0) == "");
  CHECK_THAT(rt::baseline_refusal(*int8, file_int8),
             Catch::Contains("reads weights in the frag layout, and this one is held in the file layout"));
  CHECK_THAT(rt::baseline_refusal(*q8, frag_int8), Catch::Contains("multiplies Q8_0 weights, not INT8_GW_SYM"));

  // A dispatch ranking them first at large M: the backend's chooser takes them, the kernels below.
  const std::string path = test::tuner_scratch("dispatch-dequant-blas", ".sqlite");
  const winners::DeviceFingerprint dev = winners::emu_fingerprint(80);
  {
    Store store(path);
    // A store names its device by the results it holds.
    store.put(winner_row(dev, "int8gw_frag_gemv", 1, 1e-5));
    store.put(winner_row(dev, "q8_0_gemv", 1, 1e-5));
    store.put_dispatch(dev, "linear.frag", "INT8_GW_SYM", kRest,
                       {{1, {{"emu.int8gw_frag_gemv", 1e-5}, {"emu.int8gw_dequant_cublaslt", 9e-5}}},
                        {4096, {{"emu.int8gw_dequant_cublaslt", 1e-3}, {"emu.int8gw_frag_gemm", 2e-3}}}},
                       "test");
    store.put_dispatch(dev, "linear", "Q8_0", kRest,
                       {{1, {{"emu.q8_0_gemv", 1e-5}, {"emu.q8_0_dequant_cublaslt", 9e-5}}},
                        {4096, {{"emu.q8_0_dequant_cublaslt", 1e-3}, {"emu.q8_0_gemm", 2e-3}}}},
                       "test");
  }
  auto table = std::make_shared<winners::WinnersTable>(path);
  rt::KernelChooser chooser(table, dev, "emu.", 80);
  chooser.accept_external([](const std::string& name) { return rt::store_baseline(name, "emu.") != nullptr; });
  auto choice_at = [&](const std::string& op, WeightType t, int64_t m) {
    const rt::KernelChoice& c = chooser.choose(op, &t, kernels::Shape{{"M", "N", "K", "G"}, {m, kRest[0], kRest[1], kRest[2]}, ""});
    REQUIRE(c.dispatched);
    return c.family ? c.family->name : c.external;
  };
  CHECK(choice_at("linear.frag", WeightType::INT8_GW_SYM, 4096) == "emu.int8gw_dequant_cublaslt");
  CHECK(choice_at("linear.frag", WeightType::INT8_GW_SYM, 1) == "int8gw_frag_gemv");
  CHECK(choice_at("linear", WeightType::Q8_0, 2000) == "emu.q8_0_dequant_cublaslt");
  CHECK(choice_at("linear", WeightType::Q8_0, 1) == "q8_0_gemv");
}

TEST_CASE("a fused norm or residual GEMV runs the point tuned for the stream GEMV of its shape where it can",
          "[tuner][dispatch]") {
  const winners::DeviceFingerprint dev = winners::emu_fingerprint(80);
  const WeightType awq = WeightType::AWQ_INT4;
  const kernels::KernelFamily& stream = kernels::find_family("awq_frag_stream_gemv");
  const kernels::Shape shape{stream.dims, {1, kRest[0], kRest[1], kRest[2]}, ""};
  auto store_with = [&](const kernels::Point& point) {
    const std::string path = test::tuner_scratch("fused-choice", ".sqlite");
    Store store(path);
    ResultRow r = winner_row(dev, "awq_frag_stream_gemv", 1, 1e-5);
    nlohmann::json p = nlohmann::json::object();
    for (const auto& [k, v] : point) p[k] = v;
    r.point = p;
    store.put(r);
    return std::make_shared<winners::WinnersTable>(path);
  };
  auto fused = [&](rt::KernelChooser& ch, const std::string& op) {
    const rt::KernelChoice& c = ch.choose_fused(op, "linear.frag", &awq, shape);
    REQUIRE(c.family);
    return c;
  };

  // The stored points predate the ring parameter: they ran the register ring, and are read back so.
  auto ring0 = [](kernels::Point p) {
    p["ring"] = 0;
    return p;
  };
  // Tuned at pf = 4: both fused families take the stream GEMV's schedule, as tuned.
  const kernels::Point deep{{"kw", 2}, {"pf", 4}, {"split", 8}, {"tn", 1}};
  rt::KernelChooser tuned(store_with(deep), dev, "emu.", 80);
  for (const char* op : {"rmsnorm_linear.frag", "linear_residual.frag"}) {
    const rt::KernelChoice c = fused(tuned, op);
    INFO(op);
    CHECK(c.family->op == op);
    CHECK(c.point == ring0(deep));
    CHECK(c.source == rt::KernelChoice::Source::Tuned);
  }

  // Tuned at pf = 8, which the normalizing GEMV refuses: it runs the nearest point it takes, pf = 4, as a
  // "nearest" choice; the residual one follows the tuned point itself.
  const kernels::Point deeper{{"kw", 2}, {"pf", 8}, {"split", 2}, {"tn", 1}};
  rt::KernelChooser tuned8(store_with(deeper), dev, "emu.", 80);
  const rt::KernelChoice norm = fused(tuned8, "rmsnorm_linear.frag");
  CHECK(norm.family->name == "awq_frag_norm_gemv");
  CHECK(norm.source == rt::KernelChoice::Source::Nearest);
  CHECK(norm.point == kernels::Point{{"kw", 2}, {"pf", 4}, {"ring", 0}, {"split", 2}, {"tn", 1}});
  CHECK(fused(tuned8, "linear_residual.frag").point == ring0(deeper));

  // Untuned, linear.frag's default is the frag GEMV, another kernel: the fused families' own defaults run.
  rt::KernelChooser untuned(nullptr, dev, "emu.", 80);
  const rt::KernelChoice plain = fused(untuned, "linear_residual.frag");
  CHECK(plain.family->name == "awq_frag_residual_gemv");
  CHECK(plain.source == rt::KernelChoice::Source::Default);
  // Only the fused choice is recorded: the base op was looked at, not chosen.
  CHECK(untuned.details().size() == 1);
}

TEST_CASE("a nearest shape's winner that is only its own default is not lent to a shape whose default differs",
          "[tuner][dispatch]") {
  // The H200 run of 29 Nov: a time-limited tune measured the grouped wgmma GEMM's default at 8 tokens, and 512 and
  // 4096 tokens ran that point (1.4-2.2x slower than their own default), lent as the nearest tuned shape.
  const winners::DeviceFingerprint dev = winners::emu_fingerprint(90);
  const WeightType q8 = WeightType::Q8_0;
  const kernels::KernelFamily& f = kernels::find_family("moe_gate_up.frag.q8_0");
  const kernels::Shape small{f.dims, {8, 128, 8, 768, 2048, 64}, ""}, large{f.dims, {512, 128, 8, 768, 2048, 64}, ""};
  const std::vector<kernels::Point> small_defaults = f.default_points(small), large_defaults = f.default_points(large);
  REQUIRE(small_defaults.front() != large_defaults.front());
  auto chooser_with = [&](const kernels::Point& point) {
    const std::string path = test::tuner_scratch("nearest-default", ".sqlite");
    Store store(path);
    ResultRow r;
    r.device = dev;
    r.family = "emu." + f.name;
    r.source_hash = f.source_hash;
    r.dtypes = f.dtypes;
    r.shape = small.values;
    nlohmann::json p = nlohmann::json::object();
    for (const auto& [k, v] : point) p[k] = v;
    r.point = p;
    r.stats = summarize({1e-5});
    store.put(r);
    return rt::KernelChooser(std::make_shared<winners::WinnersTable>(path), dev, "emu.", 90);
  };

  rt::KernelChooser lent_default = chooser_with(small_defaults.front());
  const rt::KernelChoice at_small = lent_default.choose("moe_gate_up.frag", &q8, small);
  CHECK(at_small.source == rt::KernelChoice::Source::Tuned);
  // The family still ranks by the nearest shape's time, at its own default for this shape.
  const rt::KernelChoice at_large = lent_default.choose("moe_gate_up.frag", &q8, large);
  CHECK(at_large.source == rt::KernelChoice::Source::Nearest);
  CHECK(kernels::point_key(at_large.point) == kernels::point_key(large_defaults.front()));

  // A point the tune found faster than the defaults there is still lent, as the nearest tuned shape's.
  std::optional<kernels::Point> found;
  for (const kernels::Point& p : kernels::enumerate_points(f))
    if (std::find(small_defaults.begin(), small_defaults.end(), p) == small_defaults.end() &&
        std::find(large_defaults.begin(), large_defaults.end(), p) == large_defaults.end() &&
        kernels::point_runs(f, p, small).empty() && kernels::point_runs(f, p, large).empty()) {
      found = p;
      break;
    }
  REQUIRE(found);
  rt::KernelChooser lent_tuned = chooser_with(*found);
  const rt::KernelChoice tuned_large = lent_tuned.choose("moe_gate_up.frag", &q8, large);
  CHECK(tuned_large.source == rt::KernelChoice::Source::Nearest);
  CHECK(tuned_large.point == *found);
}
