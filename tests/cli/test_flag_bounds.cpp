// The tools' numeric flags as a user (or a typo) gives them: a value outside the flag's range is refused at
// parse time, before any work, in one line naming the flag and the range, with exit code 2; a flag that
// means the same in two tools has the same range in both.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/paths.h"

using namespace std::string_literals;

namespace {

struct Run {
  int code;
  std::string err;
};

Run tool(const std::string& command_line) {
  const std::string err_file = qt::binary_root() + "/tests/flag-bounds-err-" + std::to_string(::getpid());
  const int status =
      std::system((qt::binary_root() + "/bin/" + command_line + " >/dev/null 2>" + err_file + " </dev/null").c_str());
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(err_file);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

void check_refused(const std::string& command_line, const std::string& needle) {
  INFO(command_line);
  const Run r = tool(command_line);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("A thread count outside 1..1024 is refused by every tool that takes one, before any thread starts") {
  // qbench once started threads until the host's task limit; -1 and 0 silently meant "all cores".
  for (const char* n : {"1000000000", "0", "-1", "1025"}) {
    check_refused("qbench --threads "s + n, "--threads: "s + n + " is out of range (1..1024)");
    check_refused("qrun --prompt-ids 1 --threads "s + n, "--threads: "s + n + " is out of range (1..1024)");
  }
  check_refused("qbench --device emu --report /nonexistent/dir --threads 5000", "(1..1024)");
  check_refused("qtune static --threads 257", "--threads: 257 is out of range (0..256)");
}

TEST_CASE("A seed is any 64-bit value in every tool, and nothing else") {
  for (const std::string& cmd : {"qrun --prompt-ids 1 --seed"s, "qconvert synthetic --format ajc1 --out x.bin --seed"s,
                                 "qtune profile --family awq_gemv --seed"s, "qtune --shape 64,64,32 --seed"s, "qtune replay --space x.json --first-seed"s}) {
    check_refused(cmd + " -1", "-1");
    check_refused(cmd + " 18446744073709551616", "18446744073709551616");
  }
}

TEST_CASE("Counts, sizes and rates are range-checked when parsed, naming the flag and its range") {
  const struct {
    std::string command_line, needle;
  } cases[] = {
      {"qbench --repeat 0", "--repeat: 0 is out of range (1..100000)"},
      {"qbench --warmup -1", "--warmup: -1 is out of range (0..100000)"},
      {"qbench --prompt 0", "--prompt: 0 is out of range (1..16777216)"},
      {"qbench --gen 99999999999", "--gen: 99999999999 is out of range"},
      {"qbench --context 0", "--context: 0 is out of range"},
      {"qbench --bandwidth-mb 4294967296", "--bandwidth-mb: 4294967296 is out of range (0..65536)"},
      {"qbench --layers 0", "--layers: 0 is out of range (1..1024)"},
      {"qbench --buckets 1,0 --report x", "--buckets: 0 is out of range (1..65536)"},
      {"qbench --prompts 8,-1 --report x", "--prompts: -1 is out of range"},
      {"qrun --prompt-ids 1 -n -1", "--n-predict: -1 is out of range (0..16777216)"},
      {"qrun --prompt-ids 1 -c 0", "--context: 0 is out of range (1..16777216)"},
      {"qrun --prompt-ids 1 --top-p 1.5", "--top-p: 1.5 is out of range (0, 1]"},
      {"qrun --prompt-ids 1 --top-p 0", "--top-p: 0 is out of range (0, 1]"},
      {"qrun --prompt-ids 1 --min-p -0.1", "--min-p: -0.1 is out of range [0, 1]"},
      {"qrun --prompt-ids 1 --temp -1", "--temp: -1 is out of range"},
      {"qrun --prompt-ids 1 --repeat-penalty 0", "--repeat-penalty: 0 is out of range"},
      {"qrun --prompt-ids 1 --top-k -1", "--top-k: -1 is out of range"},
      {"qrun --prompt-ids 1,-5", "--prompt-ids: -5 is out of range"},
      {"qconvert synthetic --format ajc1 --out x.bin --layers 0", "--layers: 0 is out of range (1..1024)"},
      {"qconvert synthetic --format ajc1 --out x.bin --dim 65537", "--dim: 65537 is out of range (1..65536)"},
      {"qconvert synthetic --format ajc1 --out x.bin --rms-eps 1", "--rms-eps: 1 is out of range (0, 1)"},
      {"qconvert synthetic --format ajc1 --out x.bin --rope-theta 0", "--rope-theta: 0 is out of range"},
      {"qconvert synthetic --format ajc1 --out x.bin --group-size 0", "--group-size: 0 is out of range (1..65536)"},
      {"qconvert convert --hf x --format ajc1 --out x.bin --group-size 0", "--group-size: 0 is out of range (1..65536)"},
      {"qconvert convert --hf x --format ajc1 --out x.bin --expert-group-size 70000", "--expert-group-size: 70000"},
      {"qtok export --out x.tokenizer --bos -1", "--bos: -1 is out of range (0..2147483647)"},
      {"qtune static --m 0", "--m: 0 is out of range (1..65536)"},
      {"qtune static --step decode --context 0", "--context: 0 is out of range (1..16777216)"},
      {"qtune static --step prefill --prompt 0", "--prompt: 0 is out of range (1..16777216)"},
      {"qtune static --step decode --layers 0", "--layers: 0 is out of range (1..1024)"},
      {"qtune static --step decode --group-size 0", "--group-size: 0 is out of range (1..65536)"},
      {"qtune replay --space x.json --seeds 0", "--seeds: 0 is out of range (1..100000)"},
      {"qtune replay --space x.json --curve-points 10001", "--curve-points: 10001 is out of range (1..10000)"},
      {"qtune --shape 64,64,32 --timeout 0", "--timeout: 0 is out of range (0, 86400]"},
      {"qtune --shape 64,64,32 --min-reps 0", "--min-reps: 0 is out of range (1..100000)"},
      {"qtune --shape 64,64,32 --min-time -1", "--min-time: -1 is out of range [0, 3600]"},
      {"qtune --model x.bin --gpu sm90 --buckets 1,65537", "--buckets: 65537 is out of range (1..65536)"},
      {"qtune --model x.bin --gpu sm90 --time-limit -5", "--time-limit: -5 is out of range [0, 604800]"},
      {"qtune --model x.bin --gpu sm90 --compile-threads 257", "--compile-threads: 257 is out of range (0..256)"},
  };
  for (const auto& c : cases) check_refused(c.command_line, c.needle);
}

TEST_CASE("An empty output path or other empty value is a usage error, never a file named nothing") {
  for (const std::string& cmd : {"qconvert synthetic --format ajc1 --out ''"s, "qconvert convert --hf x --format ajc1 --out ''"s,
                                 "qtok export --out ''"s, "qtune store export --out ''"s, "qbench --report ''"s,
                                 "qrun --prompt-ids 1 --model ''"s, "qtune profile --family awq_gemv --json ''"s})
    check_refused(cmd, "needs a value");
}

TEST_CASE("qbench --isa runs the fast path on the instruction set asked for and names it, or refuses it before any "
          "work: a name it has no kernels for, a set this CPU lacks, or a run it would not change") {
  const std::string model = qt::source_root() + "/tests/golden/files/dense.ajc1";
  const std::string run = "qbench --model " + model + " --prompt 4 --gen 2 --repeat 1 --warmup 0 --bandwidth-mb 0 --json";
  auto json_out = [](const std::string& command_line) {
    const std::string out_file = qt::binary_root() + "/tests/isa-out-" + std::to_string(::getpid());
    const int status = std::system((qt::binary_root() + "/bin/" + command_line + " >" + out_file + " 2>/dev/null").c_str());
    std::ifstream in(out_file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::filesystem::remove(out_file);
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str());
  };
  // The scalar kernels run everywhere: the backend line is the one that names what ran.
  const auto scalar = json_out(run + " --isa scalar");
  CHECK(scalar.first == 0);
  CHECK(scalar.second.find("\"cpu-fast-scalar-") != std::string::npos);
  // Each VNNI set either runs and is named, or is refused as absent here (exit 3), never silently narrowed. Neither
  // contains the other (Cascade Lake has AVX-512 VNNI and no AVX-VNNI; Alder Lake the reverse).
  for (const std::string isa : {"avx512-vnni", "avx-vnni"}) {
    const Run wide = tool(run + " --isa " + isa);
    INFO(isa << ": " << wide.err);
    if (wide.code == 0) {
      CHECK(json_out(run + " --isa " + isa).second.find("\"cpu-fast-" + isa + "-") != std::string::npos);
    } else {
      CHECK(wide.code == 3);
      CHECK(wide.err.find("--isa " + isa + ": this CPU cannot run it (it runs scalar") != std::string::npos);
    }
  }
  check_refused("qbench --isa avx3", "--isa: expected avx512-vnni, avx-vnni, avx2 or scalar, got 'avx3'");
  check_refused("qbench --isa avx2 --reference", "--isa chooses the fast path's kernels");
  check_refused("qbench --isa avx2 --report x", "--isa chooses the CPU's kernels for a plain run, not for --report");
}
