// qrun as a user runs it: errors are one line with exit code 2, and --prompt-ids/--logits-out reproduce the
// golden logits.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cpu_steal.h"
#include "device/winners/fingerprint.h"
#include "kernels_src/cpu_matvec/cpu_matvec_family.h"
#include "tuner/family/family.h"
#include "tuner/family/family.h"
#include "tuner/measure/protocol.h"
#include "tuner/store/store.h"
#include "common/paths.h"
#include "kernels_src/cpu_matvec/isa_kernels.h"
#include "tests/skip.h"

using namespace std::string_literals;

namespace {

const std::string kQrun = qt::binary_root() + "/bin/qrun";
const std::string kGolden = qt::source_root() + "/tests/golden/";
const std::string kTmp = qt::binary_root() + "/tests/qrun-cli-";

struct Result {
  int code;
  std::string err;
};

Result run_qrun(const std::string& args) {
  // ctest runs test cases as parallel processes: the pid keeps their files apart.
  const std::string err_file = kTmp + "stderr-" + std::to_string(::getpid()) + ".txt";
  const int status = std::system((kQrun + " " + args + " >/dev/null 2>" + err_file).c_str());
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  REQUIRE(in.good());
  const auto size = size_t(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(size));
  return v;
}

// A qtune store (replacing `cache`) holding one winner of the Q8_0 matvec family for this CPU, on dense.ajc1's
// lm_head (384 x 96, group 32), measured on the sources `source_hash` (default: this build's).
void write_cpu_winner(const std::string& cache, const std::string& isa, const std::string& source_hash = "") {
  std::remove(cache.c_str());
  qt::tune::Store store(cache);
  const auto family = qt::tune::find_family("cpu." + qt::kernels::cpu_matvec::matvec_family_name(qt::WeightType::Q8_0));
  qt::tune::ResultRow row;
  row.device = qt::winners::cpu_fingerprint();
  row.family = family->name();
  row.source_hash = source_hash.empty() ? family->source_hash() : source_hash;
  row.shape = {384, 96, 32};
  row.dtypes = family->dtypes();
  row.point = {{"isa", isa}, {"threads", 1}, {"rows_per_task", 8}};
  row.stats = qt::summarize({1e-5, 1.1e-5, 0.9e-5});
  store.put(row);
}

}  // namespace

TEST_CASE("qrun rejects bad command lines with one clear line and exit code 2", "[runtime][qrun]") {
  const std::string model = "--model " + kGolden + "files/dense.ajc1";
  struct Case {
    std::string args, needle;
  } cases[] = {
      {"--bogus-flag -p hi", "unknown option"},
      {"--model /nonexistent/model.bin -p hi", "no such file"},
      {model + " --prompt-ids 1,2,3,4,5,6 -c 4 -n 0", "longer than the context"},
      {model + " --prompt-ids 1,2,999 -n 0", "outside the vocabulary"},
      {model + " --prompt-ids 1,2 -c 100000 -n 0", "exceeds the model's maximum"},
      {model + " --prompt-ids 1,2 --tuned-cache /nonexistent.sqlite -n 0", "no such file"},
      {model + " --prompt-ids 1,2 --temp -1 -n 1", "--temp"},
      {model + " --prompt-ids 1,x -n 0", "--prompt-ids"},
      {model, "nothing to do"},
      {model + " --prompt-ids 1,2 --tuned-cache " + kTmp + "junk.sqlite -n 0", "junk.sqlite"},
      // A folder or a FIFO is named as what it is: a FIFO without a writer would block a reader forever.
      {"--model " + kGolden + "files -p hi", "a folder, not a file"},
      // Options that would be silently ignored are refused.
      {model + " --prompt-ids 1,2 --system hello -n 0", "--system shapes the text prompt"},
      {model + " --prompt-ids 1,2 --no-graphs -n 0", "--no-graphs is a device option"},
      // An output that is an input would be truncated while being read.
      {model + " --prompt-ids 1,2 -n 0 --logits-out " + kGolden + "files/dense.ajc1", "is the input"},
      {model + " --prompt-ids 1,2 -n 1 --device emu --threads 16", "the emulator runs at most 8 host threads"},
      {"--model " + kTmp + "fifo -p hi", "not a regular file (a FIFO"},
      {model + " --prompt-ids 1,2 --tuned-cache " + kGolden + "files -n 0", "a folder, not a file"},
  };
  ::unlink((kTmp + "fifo").c_str());
  REQUIRE(::mkfifo((kTmp + "fifo").c_str(), 0600) == 0);
  {
    std::ofstream junk(kTmp + "junk.sqlite");
    junk << "not a database, just text that is long enough to have a header page........................";
  }
  for (const auto& c : cases) {
    INFO(c.args);
    const Result r = run_qrun(c.args);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(c.needle) != std::string::npos);
  }
}

TEST_CASE("qrun runs on --device cpu and rejects an unknown device naming the known ones", "[runtime][qrun]") {
  CHECK(run_qrun("--device cpu --model " + kGolden + "files/dense.ajc1 --prompt-ids 3,4,5 -n 0").code == 0);
  const Result r = run_qrun("--device tpu --prompt-ids 1 -n 0");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("unknown device 'tpu'") != std::string::npos);
  for (const char* dev : {"cpu", "emu", "cuda"}) CHECK(r.err.find(dev) != std::string::npos);
}

TEST_CASE("qrun --prompt-ids --logits-out writes the golden logits of every position", "[runtime][qrun]") {
  // dense.ak48 holds the ak48-awq scheme; its golden seq0 is [0, 361, 239, 262, 343, 221, 383].
  const std::string out = kTmp + "logits.f32";
  const std::vector<float> golden = read_floats(kGolden + "logits/dense/ak48-awq/seq0.f32");
  for (bool reference : {true, false}) {
    INFO((reference ? "reference" : "fast"));
    std::remove(out.c_str());
    const Result r = run_qrun("--model " + kGolden + "files/dense.ak48 --prompt-ids 0,361,239,262,343,221,383 -n 0 " +
                              "--logits-out " + out + (reference ? " --reference" : ""));
    REQUIRE(r.code == 0);
    const std::vector<float> got = read_floats(out);
    REQUIRE(got.size() == golden.size());
    REQUIRE(got.size() == 7 * 384);
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - golden[i]));
    CHECK(worst <= (reference ? 1e-3f : 0.3f));
  }
}

TEST_CASE("qrun generates from token ids reproducibly for a seed", "[runtime][qrun]") {
  const std::string base = qt::binary_root() + "/bin/qrun --model " + kGolden +
                           "files/moe-norm.q8_0.moe3 --prompt-ids 5,6,7 -n 6 --seed 11 --temp 1 --no-stats";
  auto capture = [&](const std::string& cmd) {
    const std::string file = kTmp + "ids.txt";
    REQUIRE(std::system((cmd + " >" + file).c_str()) == 0);
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string a = capture(base), b = capture(base);
  CHECK(a == b);
  CHECK(lines(a) == 6);
}

TEST_CASE("qrun --tuned-cache applies the winners a qtune store holds for this CPU", "[runtime][qrun]") {
  const std::string cache = kTmp + "tuned.sqlite";
  write_cpu_winner(cache, "scalar");
  const std::string out = kTmp + "tuned-logits.f32", plain = kTmp + "plain-logits.f32";
  const std::string args = "--model " + kGolden + "files/dense.ajc1 --prompt-ids 3,4,5 -n 0 --logits-out ";
  const Result r = run_qrun(args + out + " --tuned-cache " + cache);
  REQUIRE(r.code == 0);
  // One exact winner; the store's nearest-shape rule lends it to the model's three other shapes.
  CHECK(r.err.find("4/4 matmul shapes have a winner for this CPU (1 exact, 3 from the nearest tuned shape); "
                   "isa scalar, 1 threads") != std::string::npos);
  REQUIRE(run_qrun(args + plain).code == 0);
  // The tuned choices change speed, not results: the integer dot products are exact on every ISA.
  const std::vector<float> a = read_floats(out), b = read_floats(plain);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(1e-4));
}

TEST_CASE("qrun --tuned-cache whose CPU winner took AVX2's dot products keeps the AVX-VNNI GEMM where the CPU has it",
          "[runtime][qrun]") {
  // The matvec family times dot products, not the Q8_0 GEMM; AVX-VNNI's dot products are AVX2's, so a store that
  // chose AVX2 must not take the VNNI GEMM away (about 2.3x in prefill on an Emerald Rapids core).
  if (!qt::rt::isa_supported(qt::rt::Isa::kAvxVnni)) QTUNE_SKIP("this CPU has no AVX-VNNI");
  const std::string cache = kTmp + "tuned-avx2.sqlite";
  write_cpu_winner(cache, "avx2");
  const Result r = run_qrun("--model " + kGolden + "files/dense.ajc1 --prompt-ids 3,4,5 -n 0 --tuned-cache " + cache);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("isa avx-vnni (the tuned avx2 dot products), 1 threads") != std::string::npos);
}

TEST_CASE("qrun --tuned-cache ignores winners measured on other kernel sources and says how many", "[runtime][qrun]") {
  const std::string cache = kTmp + "stale.sqlite";
  write_cpu_winner(cache, "scalar", "0123456789ab-an-older-build");
  const Result r = run_qrun("--model " + kGolden + "files/dense.ajc1 --prompt-ids 3,4,5 -n 0 --tuned-cache " + cache);
  REQUIRE(r.code == 0);
  // The stale row lends nothing to any of the four shapes, and is counted once.
  CHECK(r.err.find("0/4 matmul shapes have a winner for this CPU") != std::string::npos);
  CHECK(r.err.find("ignored 1 stale results measured on older kernel sources") != std::string::npos);
  CHECK(r.err.find("using the built-in choices") != std::string::npos);
}

TEST_CASE("qbench --choose-decode ranks the CPU decode's prefetch into a store, and qrun follows the ranking with the same tokens",
          "[runtime][qrun]") {
  // Whether the Q8_0 decode's software prefetch pays, and into which cache, depends on the CPU
  // (q8_gemm_kernels_for): qbench ranks the three on the model, and qrun given the store runs the one it stored
  // first, with the same tokens as the others.
  // The sanitized build makes qrun and the tests, not qbench; the main build runs this.
  const std::string qbench = qt::binary_root() + "/bin/qbench";
  if (::access(qbench.c_str(), X_OK) != 0) QTUNE_SKIP("qbench is not built here (the sanitized build makes qrun only)");
  const std::string cache = kTmp + "decode-" + std::to_string(::getpid()) + ".sqlite";
  const std::string out = kTmp + "decode-out-" + std::to_string(::getpid()) + ".txt";
  std::remove(cache.c_str());
  const std::string model = "--model " + kGolden + "files/dense.ajc1 ";
  REQUIRE(std::system((qbench + " " + model +
                       "--choose-decode --prompt 2 --gen 2 --repeat 1 --warmup 0 --threads 1 --tuned-cache " + cache +
                       " >" + out + " 2>/dev/null").c_str()) == 0);
  std::stringstream ranked;
  ranked << std::ifstream(out).rdbuf();
  INFO(ranked.str());
  CHECK(ranked.str().find("plain ") != std::string::npos);
  CHECK(ranked.str().find("no prefetch ") != std::string::npos);
  CHECK(ranked.str().find("L1 prefetch ") != std::string::npos);
  const std::string runs = "runs this model's decode on this CPU with ";
  const bool without = ranked.str().find(runs + "no prefetch") != std::string::npos;
  const bool l1 = ranked.str().find(runs + "the prefetch into L1 (l1-prefetch)") != std::string::npos;
  CHECK(int(without) + int(l1) + int(ranked.str().find(runs + "the prefetch (plain)") != std::string::npos) == 1);
  // The tokens of each variant, greedy, and the statistics line of the run that follows the store.
  auto tokens = [&](const std::string& args) {
    const std::string err = out + ".err";
    const int status = std::system((kQrun + " " + model + "--prompt-ids 3,4,5 -n 6 --temp 0 --threads 1 " + args + " >" +
                                    out + " 2>" + err).c_str());
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    std::stringstream o, e;
    o << std::ifstream(out).rdbuf();
    e << std::ifstream(err).rdbuf();
    std::remove(err.c_str());
    return std::pair{o.str(), e.str()};
  };
  const auto stored = tokens("--tuned-cache " + cache);
  INFO(stored.second);
  CHECK(stored.second.find(std::string("decode step: ") + (without ? "no prefetch" : l1 ? "L1 prefetch" : "plain") +
                           ", measured fastest of 3 by qbench --choose-decode") != std::string::npos);
  CHECK(!stored.first.empty());
  CHECK(tokens("--decode plain").first == stored.first);
  CHECK(tokens("--decode no-prefetch").first == stored.first);
  CHECK(tokens("--decode l1-prefetch").first == stored.first);
  // --no-stored-decode ignores the ranking.
  CHECK(tokens("--no-stored-decode --tuned-cache " + cache).second.find("decode step:") == std::string::npos);
  const Result bad = run_qrun(model + "--prompt-ids 1,2 -n 1 --decode pdl");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--decode on the CPU: expected auto, plain, no-prefetch or l1-prefetch, got 'pdl'") !=
        std::string::npos);
  CHECK(lines(bad.err) == 1);
  std::remove(cache.c_str());
  std::remove(out.c_str());
}

TEST_CASE("qbench reports its decode's share of the bandwidth with the CPU time a hypervisor stole during it",
          "[runtime][qrun]") {
  // On a VM a descheduled vCPU stops a parallel decode step at its next join: the share alone would blame the
  // kernels for time the host took. The figure sums the decode runs, from this process's CPUs' counters: 40 runs
  // of the golden model's decode pass several clock ticks.
  const std::string qbench = qt::binary_root() + "/bin/qbench";
  if (::access(qbench.c_str(), X_OK) != 0) QTUNE_SKIP("qbench is not built here (the sanitized build makes qrun only)");
  const std::string out = kTmp + "steal-" + std::to_string(::getpid()) + ".txt";
  const std::string args = " --model " + kGolden + "files/dense.ajc1 --prompt 1 --gen 120 --repeat 40 --warmup 0 "
                           "--threads 1 --bandwidth-mb 8";
  auto run = [&](const std::string& extra) {
    REQUIRE(std::system((qbench + args + extra + " >" + out + " 2>/dev/null").c_str()) == 0);
    std::stringstream text;
    text << std::ifstream(out).rdbuf();
    std::remove(out.c_str());
    return text.str();
  };
  const nlohmann::json j = nlohmann::json::parse(run(" --json"));
  INFO(j.dump());
  REQUIRE(j.contains("decode_steal_fraction"));
  CHECK(j["decode_fraction_of_roofline"].get<double>() > 0);
  const std::string text = run("");
  INFO(text);
  if (qt::read_cpu_times().known) {
    const double steal = j["decode_steal_fraction"].get<double>();
    CHECK(steal >= 0.0);
    CHECK(steal <= 1.0);
    CHECK(text.find("% of the CPU time of the decode runs stolen by the hypervisor)") != std::string::npos);
  } else {
    CHECK(j["decode_steal_fraction"].is_null());
    CHECK(text.find("stolen") == std::string::npos);
  }
}

TEST_CASE("qrun -i refuses a message that is not UTF-8 and the chat goes on with the next one", "[runtime][qrun]") {
  // A model with the real tokenizer's vocabulary, so that the chat template encodes.
  const std::string model = kTmp + "chat-" + std::to_string(::getpid()) + ".ajc1";
  REQUIRE(std::system((qt::binary_root() + "/bin/qconvert synthetic -q --preset tiny --vocab 151936 --format ajc1 --out " +
                       model + " >/dev/null 2>&1").c_str()) == 0);
  const std::string in = kTmp + "chat-in-" + std::to_string(::getpid()) + ".txt";
  std::ofstream(in, std::ios::binary) << "hi\n\xff\xfe\nhi again\n";
  const std::string err = kTmp + "chat-err-" + std::to_string(::getpid()) + ".txt";
  const int status = std::system((kQrun + " --model " + model + " -i -n 2 --temp 0 --no-stats < " + in +
                                  " >/dev/null 2>" + err).c_str());
  std::ifstream e(err);
  std::stringstream ss;
  ss << e.rdbuf();
  INFO(ss.str());
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(ss.str().find("the message is not valid UTF-8: byte 0 (0xFF); the message was not sent") != std::string::npos);
  // Three prompts: the first turn, the refused line, the turn after it, then the end of input.
  size_t prompts = 0;
  for (size_t at = ss.str().find("> "); at != std::string::npos; at = ss.str().find("> ", at + 2)) ++prompts;
  CHECK(prompts == 4);
  for (const std::string& f : {in, err, model, model + ".tokenizer"}) std::remove(f.c_str());
}

TEST_CASE("qrun says when generation stopped because the context is full, not because -n was reached",
          "[runtime][qrun]") {
  const std::string model = "--model " + kGolden + "files/dense.ajc1 --prompt-ids 1,2 --temp 0";
  const Result full = run_qrun(model + " -c 4 -n 10");
  REQUIRE(full.code == 0);
  CHECK(full.err.find("generated 3 tok") != std::string::npos);  // the last one needs no room in the cache
  CHECK(full.err.find("(stopped: the context is full, see -c/--context)") != std::string::npos);
  const Result room = run_qrun(model + " -c 16 -n 3");
  REQUIRE(room.code == 0);
  CHECK(room.err.find("stopped: the context is full") == std::string::npos);
}
