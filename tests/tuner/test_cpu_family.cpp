// The cpu device end to end: the runtime's quantized matvec tuned for real in a worker, results stored,
// the winner found again by lookup.
#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

#include "tests/tuner/run_qtune.h"
#include "device/winners/fingerprint.h"
#include "tuner/family/candidate.h"
#include "tuner/store/store.h"
#include "tests/tuner/scratch_path.h"

using namespace qt::tune;
using qt::winners::cpu_fingerprint;

TEST_CASE("cpu matvec spaces respect the rows-per-task constraint", "[tuner][cpu]") {
  auto fam = find_family("cpu.matvec.q8_0");
  Space s = fam->space({64, 256, 64});
  REQUIRE(s.size() > 0);
  for (PointId p = 0; p < s.size(); ++p) {
    auto v = s.values(p);
    int64_t threads = int64_t(v[1]), rpt = int64_t(v[2]);
    REQUIRE(rpt * threads <= ((64 + threads - 1) / threads) * threads);
  }
  REQUIRE(s.size() < fam->space({4096, 256, 64}).size());  // small N prunes large work items
}

TEST_CASE("every cpu matvec type verifies against the reference and is tuned into the store", "[tuner][cpu]") {
  const std::string path = qt::test::tuner_scratch("cpu", ".sqlite");
  Store store(path);
  Worker worker(qt::test::qtune_worker());
  DeviceFingerprint dev = cpu_fingerprint();
  for (const char* name : {"cpu.matvec.q8_0", "cpu.matvec.int8_sym", "cpu.matvec.int8_asym", "cpu.matvec.awq_int4"}) {
    INFO(name);
    auto fam = find_family(name);
    std::vector<int64_t> shape = {256, 512, 64};
    TuneOptions opt;
    opt.budget = {6, -1};
    opt.measure.min_seconds = 0.002;
    std::map<std::string, int> statuses;
    TuneReport rep = tune_shape(*fam, shape, worker, opt, [&](const nlohmann::json& point, const CandidateOutcome& o) {
      statuses[status_name(o.status)]++;
      ResultRow r;
      r.device = dev;
      r.family = fam->name();
      r.source_hash = fam->source_hash();
      r.shape = shape;
      r.dtypes = fam->dtypes();
      r.point = point;
      r.status = o.status;
      r.stats = o.stats;
      store.put(r);
    });
    REQUIRE(rep.evaluations == 6);
    REQUIRE(statuses.count("wrong_result") == 0);
    REQUIRE(statuses.count("crashed") == 0);
    REQUIRE(rep.best_point);
    auto w = store.lookup(dev, fam->name(), fam->dtypes(), shape);
    REQUIRE(w);
    REQUIRE(w->point == *rep.best_point);
    REQUIRE(w->median_s == Approx(rep.best_stats.median));
  }
  REQUIRE(worker.spawned() == 1);
}
