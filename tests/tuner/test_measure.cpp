// The measurement protocol on synthetic timers, and dtype-aware output verification.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/rng.h"
#include "tuner/family/candidate.h"
#include "tuner/measure/protocol.h"
#include "tuner/measure/verify.h"

using namespace qt::tune;
using qt::Rng;

namespace {
// Deterministic "timer": base time with +-jitter noise and an occasional outlier.
std::function<double()> timer(double base, double jitter, uint64_t seed, int* calls) {
  auto rng = std::make_shared<Rng>(seed);
  return [=] {
    ++*calls;
    double t = base * (1 + jitter * (rng->uniform() * 2 - 1));
    if (rng->below(20) == 0) t *= 3;  // a preempted run
    return t;
  };
}
}  // namespace

TEST_CASE("summary statistics: median, MAD, quantiles and a median CI from order statistics", "[tuner][measure]") {
  Stats s = summarize({5, 1, 4, 2, 3, 100});
  REQUIRE(s.n == 6);
  REQUIRE(s.median == Approx(3.5));
  REQUIRE(s.min == 1);
  REQUIRE(s.max == 100);
  REQUIRE(s.mad == Approx(1.5));  // |x - 3.5| = 2.5 1.5 .5 .5 1.5 96.5 -> median 1.5
  REQUIRE(s.ci_low <= s.median);
  REQUIRE(s.ci_high >= s.median);
  std::vector<double> many;
  for (int i = 0; i < 400; ++i) many.push_back(i);
  Stats m = summarize(many);
  REQUIRE(m.ci_low == Approx(180).margin(2));  // 200 -+ 1.96 * sqrt(400) / 2
  REQUIRE(m.ci_high == Approx(219).margin(2));
  // Exact ranks (Altman, Statistics with Confidence): 1-based round(180.4) = 180 and round(220.6) = 221,
  // i.e. the values 179 and 220 of 0..399.
  REQUIRE(m.ci_low == 179);
  REQUIRE(m.ci_high == 220);
  // n = 50: ranks round(18.07) = 18 and round(32.93) = 33.
  std::vector<double> fifty;
  for (int i = 0; i < 50; ++i) fifty.push_back(i);
  Stats f = summarize(fifty);
  REQUIRE(f.ci_low == 17);
  REQUIRE(f.ci_high == 32);
}

TEST_CASE("warm-up runs are untimed and repetitions continue to the count and time minimums", "[tuner][measure]") {
  int calls = 0;
  MeasureOptions o;
  o.warmup = 3;
  o.min_reps = 10;
  o.min_seconds = 0.5;
  o.max_reps = 1000;
  o.batch = 5;
  int flushes = 0;
  Measurement m = measure(timer(0.01, 0.05, 1, &calls), [&] { ++flushes; }, o, nullptr);
  REQUIRE(m.stats.n >= 40);  // 0.5 s of ~0.01 s runs (outliers make it fewer than 50)
  REQUIRE(m.stats.n % 5 == 0);
  REQUIRE(calls == m.stats.n + 3);
  REQUIRE(flushes == m.stats.n);
  REQUIRE(m.stats.median == Approx(0.01).epsilon(0.06));
  REQUIRE_FALSE(m.raced_out);
}

TEST_CASE("racing stops a clearly slower candidate early and keeps timing a near tie", "[tuner][measure]") {
  MeasureOptions o;
  o.warmup = 1;
  o.min_reps = 50;
  o.min_seconds = 0;
  o.max_reps = 200;
  o.batch = 5;
  int calls = 0;
  Stats incumbent = measure(timer(1e-3, 0.02, 2, &calls), nullptr, o, nullptr).stats;
  REQUIRE(incumbent.n == 50);

  int slow_calls = 0;
  Measurement slow = measure(timer(1.5e-3, 0.02, 3, &slow_calls), nullptr, o, &incumbent);
  REQUIRE(slow.raced_out);
  REQUIRE(slow.stats.n == 5);  // decided after the first batch
  REQUIRE(slow_calls == 6);

  int tie_calls = 0;
  Measurement tie = measure(timer(1.005e-3, 0.02, 4, &tie_calls), nullptr, o, &incumbent);
  REQUIRE_FALSE(tie.raced_out);
  REQUIRE(tie.stats.n == 50);

  o.racing = false;
  Measurement full = measure(timer(1.5e-3, 0.02, 3, &slow_calls), nullptr, o, &incumbent);
  REQUIRE_FALSE(full.raced_out);
  REQUIRE(full.stats.n == 50);
}

TEST_CASE("verification tolerances follow the output dtype and catch NaN", "[tuner][measure]") {
  std::vector<float> ref(256), out(256);
  for (int i = 0; i < 256; ++i) ref[i] = std::sin(float(i)) * 4;
  // An fp16-rounded output passes as f16 but not as f32.
  for (int i = 0; i < 256; ++i) out[i] = ref[i] * (1 + 1.0f / 2048);
  REQUIRE(verify_output(ref.data(), out.data(), 256, DType::F16, 64).ok);
  REQUIRE_FALSE(verify_output(ref.data(), out.data(), 256, DType::F32, 64).ok);
  // bf16 rounding passes as bf16 only.
  for (int i = 0; i < 256; ++i) out[i] = ref[i] * (1 + 1.0f / 256);
  REQUIRE(verify_output(ref.data(), out.data(), 256, DType::BF16, 64).ok);
  REQUIRE_FALSE(verify_output(ref.data(), out.data(), 256, DType::F16, 64).ok);
  // Integers compare exactly.
  out = ref;
  REQUIRE(verify_output(ref.data(), out.data(), 256, DType::I32, 64).ok);
  out[17] += 1;
  VerifyResult vi = verify_output(ref.data(), out.data(), 256, DType::I32, 64);
  REQUIRE(vi.mismatches == 1);
  REQUIRE(vi.first_bad == 17);
  out = ref;
  out[3] = NAN;
  VerifyResult vn = verify_output(ref.data(), out.data(), 256, DType::BF16, 64);
  REQUIRE_FALSE(vn.ok);
  REQUIRE(vn.non_finite == 1);
}

TEST_CASE("an infinity the reference also has matches, one of the other sign does not", "[tuner][measure]") {
  std::vector<float> ref = {1.0f, INFINITY, -INFINITY, 2.0f}, out = ref;
  VerifyResult same = verify_output(ref.data(), out.data(), ref.size(), DType::F32, 4);
  REQUIRE(same.ok);
  REQUIRE(same.max_abs_err == 0);
  out[1] = -INFINITY;
  VerifyResult flipped = verify_output(ref.data(), out.data(), ref.size(), DType::F32, 4);
  REQUIRE_FALSE(flipped.ok);
  REQUIRE(flipped.mismatches == 1);
  REQUIRE(flipped.first_bad == 1);
  out = ref;
  out[2] = 5.0f;  // a finite value where the reference is -inf
  VerifyResult finite = verify_output(ref.data(), out.data(), ref.size(), DType::F32, 4);
  REQUIRE_FALSE(finite.ok);
  REQUIRE(finite.first_bad == 2);
}

namespace {
// An instance whose behaviour is chosen by the point: correct, wrong, compile error, resource error.
class ScriptedInstance : public KernelInstance {
 public:
  SetupCosts setup() override { return {}; }
  void prepare(const nlohmann::json& p) override {
    mode_ = p.at("mode").get<std::string>();
    if (mode_ == "compile") throw CandidateError(Status::CompileFailed, "error: identifier undefined");
    if (mode_ == "resources") throw CandidateError(Status::ResourceFailed, "too many resources requested");
  }
  void run() override {
    out_ = ref_;
    if (mode_ == "wrong") out_[5] += 1.0f;
    if (mode_ == "throws") throw std::runtime_error("launch failed");
  }
  double time() override { return mode_ == "slow" ? 2e-3 : 1e-3; }
  const float* output() const override { return out_.data(); }
  const std::vector<float>& reference() override { return ref_; }
  Tolerance tolerance(double rms) const override { return default_tolerance(DType::F32, 16, rms); }

 private:
  std::string mode_;
  std::vector<float> ref_ = std::vector<float>(32, 0.5f), out_;
};
}  // namespace

TEST_CASE("each failure class is recorded as such by the candidate protocol", "[tuner][measure]") {
  ScriptedInstance inst;
  MeasureOptions m;
  m.min_seconds = 0;
  auto status = [&](const char* mode, const Stats* inc = nullptr) {
    return run_candidate(inst, {{"mode", mode}}, m, inc, 0);
  };
  CandidateOutcome ok = status("ok");
  REQUIRE(ok.status == Status::Ok);
  REQUIRE(ok.stats.median == 1e-3);
  REQUIRE(status("wrong").status == Status::WrongResult);
  REQUIRE(status("wrong").detail.find("1 mismatches") != std::string::npos);
  REQUIRE(status("compile").status == Status::CompileFailed);
  REQUIRE(status("resources").status == Status::ResourceFailed);
  REQUIRE(status("throws").status == Status::RuntimeError);
  m.min_reps = 20;  // racing saves the repetitions beyond the first batch
  CandidateOutcome slow = status("slow", &ok.stats);
  REQUIRE(slow.status == Status::RacedOut);
  REQUIRE(slow.stats.n == m.batch);
}
