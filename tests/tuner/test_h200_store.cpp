// The store of qtune's first GPU run (an H200, 2026-11-26; tests/tuner/data/README.md) read the way the
// runtime reads it: a device that reports that H200's fingerprint gets its measured winners and its batch
// dispatch, and a driver or qtune update keeps them, said in one line.
#include <catch2/catch.hpp>

#include "device/emu/emu_device.h"
#include "kernels_src/registry/registry.h"
#include "kernels_src/registry/stored_point.h"
#include "runtime/gpu/kernel_choice.h"
#include "tests/tuner/h200_fixture.h"
#include "tuner/store/store.h"

using namespace qt;

namespace {

// The emulator standing in for the H200: the runtime takes the store key from the device, so a device that
// reports the H200's fingerprint is, for every lookup, that GPU.
class ReportsFingerprint final : public emu::EmuDevice {
 public:
  explicit ReportsFingerprint(winners::DeviceFingerprint fp) : EmuDevice(options()), fp_(std::move(fp)) {}
  winners::DeviceFingerprint store_fingerprint() const override { return fp_; }

 private:
  static emu::EmuOptions options() {
    emu::EmuOptions o;
    o.arch = 90;
    return o;
  }
  winners::DeviceFingerprint fp_;
};

const WeightType kAwq = WeightType::AWQ_INT4;

kernels::Shape linear(int64_t m, int64_t n, int64_t k) { return kernels::Shape{{"M", "N", "K", "G"}, {m, n, k, 128}, ""}; }

}  // namespace

TEST_CASE("a device reporting the H200's fingerprint gets the H200 run's winners and dispatch through the "
          "runtime's kernel choice",
          "[tuner][dispatch]") {
  const std::string path = test::h200_fixture_for_todays_sources("h200-fixture");
  const std::vector<winners::StoredDevice> stored = tune::Store(path).devices();
  REQUIRE(stored.size() == 1);
  const winners::DeviceFingerprint h200 = stored[0].fingerprint;
  CHECK(h200.name == "NVIDIA H200");
  CHECK(h200.bus_width_bits == 6016);  // read from the fingerprint column, not rebuilt from the other columns
  auto table = std::make_shared<winners::WinnersTable>(path);

  // What DeviceBackend and qbench's report do: the key is the device's own store_fingerprint().
  ReportsFingerprint device(h200);
  rt::KernelChooser chooser(table, device.store_fingerprint(), "cuda.", device.arch());
  CHECK(winners::match_line(table->match(device.store_fingerprint()), h200, path).empty());

  const rt::KernelChoice& decode = chooser.choose("linear.frag", &kAwq, linear(1, 4096, 4096));
  REQUIRE(decode.family);
  CHECK(decode.family->name == "awq_frag_gemv");
  CHECK(decode.dispatched);
  CHECK(decode.source == rt::KernelChoice::Source::Tuned);
  // 12.19 us on the H200, against 15.49 us for the default point.
  CHECK(kernels::point_key(decode.point) == "bk=64,pf=1,ru=1,split=16,stages=2,tn=1,warps=1,zpf=0");  // ru and zpf came after the run
  CHECK(decode.point != decode.family->default_point());

  // At M = 16 on the gate/up shape the H200 measured the GEMM ahead of the GEMV: the dispatch follows it.
  const rt::KernelChoice& batch = chooser.choose("linear.frag", &kAwq, linear(16, 12288, 4096));
  REQUIRE(batch.family);
  CHECK(batch.family->name == "awq_frag_gemm");
  CHECK(batch.dispatched);
  CHECK(kernels::point_key(batch.point) == "bk=64,mf=2,pf=2,split=4,stages=2,warps=4");
  CHECK(chooser.counts().tuned == 2);
}

TEST_CASE("a driver and qtune update on the same H200 keeps the tuned winners and says so in one line, while another "
          "GPU model gets none and a line naming the H200",
          "[tuner][dispatch]") {
  const std::string path = test::h200_fixture_for_todays_sources("h200-fixture");
  auto table = std::make_shared<winners::WinnersTable>(path);
  winners::DeviceFingerprint updated = tune::Store(path).devices().at(0).fingerprint;
  updated.driver = "13.1";
  updated.nvrtc_version = "13.1";
  updated.qtune_version = "0.2.0";
  ReportsFingerprint device(updated);
  rt::KernelChooser chooser(table, device.store_fingerprint(), "cuda.", device.arch());
  const rt::KernelChoice& c = chooser.choose("linear.frag", &kAwq, linear(1, 4096, 4096));
  CHECK(c.source == rt::KernelChoice::Source::Tuned);
  CHECK(kernels::point_key(c.point) == "bk=64,pf=1,ru=1,split=16,stages=2,tn=1,warps=1,zpf=0");
  const std::string line = winners::match_line(table->match(updated), updated, path);
  CHECK(line.find("this GPU model (NVIDIA H200, sm_90)") != std::string::npos);
  CHECK(line.find("driver 13.0 (here 13.1)") != std::string::npos);

  winners::DeviceFingerprint h100 = updated;
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.sm_count = 132;
  h100.memory_bytes = 85031714816ull;
  ReportsFingerprint other(h100);
  rt::KernelChooser untuned(table, other.store_fingerprint(), "cuda.", other.arch());
  CHECK(untuned.choose("linear.frag", &kAwq, linear(1, 4096, 4096)).source == rt::KernelChoice::Source::Default);
  CHECK(winners::match_line(table->match(h100), h100, path).find("it holds NVIDIA H200 (sm_90)") != std::string::npos);
}

TEST_CASE("a point stored before a parameter was added reads as the value it ran, and one missing any other "
          "parameter names nothing", "[tuner][dispatch]") {
  const kernels::KernelFamily& f = kernels::find_family("awq_frag_gemv");
  const nlohmann::json before = {{"bk", 64}, {"pf", 1}, {"split", 16}, {"stages", 2}, {"tn", 1}, {"warps", 1}};
  const std::optional<kernels::Point> p = kernels::point_from_json(f, before);
  REQUIRE(p);
  CHECK(p->at("zpf") == 0);
  CHECK(p->at("ru") == 1);  // the kernel that ran, though today's default is 4
  nlohmann::json now = before;
  now["zpf"] = 1;
  CHECK(kernels::point_from_json(f, now)->at("zpf") == 1);
  nlohmann::json no_bk = before;
  no_bk.erase("bk");
  CHECK_FALSE(kernels::point_from_json(f, no_bk));
  // A family whose parameters all existed when its points were stored has no absent value to give.
  const kernels::KernelFamily& stream = kernels::find_family("awq_frag_stream_gemv");
  CHECK_FALSE(kernels::point_from_json(stream, {{"kw", 4}, {"pf", 8}, {"split", 4}}));
}
