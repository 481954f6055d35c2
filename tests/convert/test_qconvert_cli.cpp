// The qconvert executable: exit codes and one-line errors for bad input, JSON from `info`, and the
// synthetic -> convert path end to end.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/convert/convert_test_support.h"
#include "tests/skip.h"
#include "common/paths.h"

namespace fs = std::filesystem;

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Run qconvert(const std::string& args, const fs::path& scratch) {
  const std::string cmd = qt::binary_root() + "/bin/qconvert " + args + " > '" + (scratch / "out.txt").string() +
                          "' 2> '" + (scratch / "err.txt").string() + "'";
  Run r;
  const int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(scratch / "out.txt");
  r.err = slurp(scratch / "err.txt");
  return r;
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("qconvert cli: bad input exits 2 with exactly one error line", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-errors");
  qt::test::put_bytes(dir / "garbage.bin", std::string(300, 'x'));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"info " + (dir / "missing.bin").string(), "missing.bin: cannot open"},
      {"info " + (dir / "garbage.bin").string(), "magic"},
      {"info", "missing model file"},
      {"convert --hf " + (dir / "nope").string() + " --format ajc1 --out x.bin", "not a directory"},
      {"convert --hf " + dir.string() + " --format ajc1 --out x.bin --bogus 1", "unknown option '--bogus'"},
      {"convert --hf " + dir.string() + " --format gguf --out x.bin", "gguf"},
      {"convert --hf " + dir.string() + " --format ajc1", "--out"},
      {"synthetic --preset nope --format ajc1 --out x.bin", "unknown preset 'nope'"},
      {"synthetic --preset tiny --format hf --dtype f8 --out x", "--dtype"},
      {"synthetic --preset tiny --format ajc1 --dtype f16 --out x", "--dtype applies only to --format hf"},
      {"synthetic --preset tiny --format hf --shard-size lots --out x", "--shard-size"},
      {"synthetic --preset tiny --format hf --shard-size 999999999999GiB --out x", "does not fit in 64 bits"},
      {"frobnicate", "unknown command 'frobnicate'"},
      {"", "missing command"},
  };
  for (const auto& [args, expect] : cases) {
    INFO("qconvert " << args << "\nstderr: " << slurp(dir / "err.txt"));
    const Run r = qconvert(args, dir);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::StartsWith("qconvert: error: ") && Catch::Contains(expect));
    CHECK(r.out.empty());
  }
}

TEST_CASE("qconvert cli: synthetic hf -> convert -> info round trip", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-roundtrip");
  const std::string hf = (dir / "hf").string(), model = (dir / "m.moe3").string();
  Run r = qconvert("synthetic --preset tiny-moe --layers 1 --format hf --dtype bf16 --shard-size 64KB --seed 4 --out " + hf, dir);
  REQUIRE(r.code == 0);
  r = qconvert("convert --hf " + hf + " --format moe3 --expert-type int8-asym --expert-group-size 32 --out " + model, dir);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("peak RSS"));
  r = qconvert("info " + model, dir);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["format"] == "moe3");
  CHECK(j["header"]["n_layers"] == 1);
  CHECK(j["header"]["num_experts"] == 8);
  CHECK(j["tensors"].size() > 20);
  r = qconvert("--help", dir);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("synthetic"));
}

TEST_CASE("qconvert cli: a checkpoint's tokenizer.json becomes <out>.tokenizer with config.json's bos/eos", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-tokenizer");
  const fs::path src = fs::path(qt::source_root());
  const fs::path hf = dir / "hf";
  fs::create_directories(hf);
  const fs::path golden = src / "tests" / "golden" / "models" / "dense";
  REQUIRE(fs::exists(golden / "config.json"));  // committed golden checkpoint; never skip silently
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(golden / f, hf / f);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(src / "models" / "tokenizers" / "qwen3" / f, hf / f);
  fs::create_directories(dir / "out");
  const fs::path model = dir / "out" / "m.ajc1";
  const Run r = qconvert("convert -q --hf " + hf.string() + " --format ajc1 --out " + model.string(), dir);
  REQUIRE(r.code == 0);
  CHECK(fs::exists(dir / "out" / "tokenizer.json"));
  CHECK(fs::exists(dir / "out" / "tokenizer_config.json"));
  const std::string tok = slurp(model.string() + ".tokenizer");
  REQUIRE(tok.size() > 1000000);  // 151,669 entries of the real Qwen3 vocabulary
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, tok.data() + at, 4);
    return v;
  };
  // The golden config.json sets bos_token_id 0 and eos_token_id 1; qwen3.c's exporter copies them from there.
  CHECK(u32(4) == 0);
  CHECK(u32(8) == 1);
}

TEST_CASE("qconvert cli: an output path that is not a regular file is refused, never replaced", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-out-kinds");
  qt::test::put_bytes(dir / "target.bin", "keep me");
  fs::create_symlink(dir / "target.bin", dir / "link.bin");
  REQUIRE(::mkfifo((dir / "fifo.bin").c_str(), 0644) == 0);
  fs::create_directory(dir / "folder.bin");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(dir / "link.bin").string(), "symbolic link"},
      {(dir / "fifo.bin").string(), "FIFO"},
      {(dir / "folder.bin").string(), "folder"},
      {"/dev/null", "character device"},
  };
  for (const auto& [out, kind] : cases) {
    const Run r = qconvert("synthetic --preset tiny --format ajc1 --out " + out, dir);
    INFO(out << "\nstderr: " << r.err);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains(out) && Catch::Contains(kind));
    CHECK_FALSE(fs::exists(out + ".partial"));
  }
  CHECK(fs::is_symlink(dir / "link.bin"));
  CHECK(slurp(dir / "target.bin") == "keep me");
  CHECK(fs::is_fifo(dir / "fifo.bin"));
  CHECK(fs::is_character_file("/dev/null"));
}

TEST_CASE("qconvert cli: a missing output folder is an error and is not created", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-out-folder");
  const fs::path out = dir / "missing" / "deeper" / "x.bin";
  const Run r = qconvert("synthetic --preset tiny --format ajc1 --out " + out.string(), dir);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::Contains("does not exist"));
  CHECK_FALSE(fs::exists(dir / "missing"));
}

TEST_CASE("qconvert cli: a model larger than the free space is refused before writing", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-out-space");
  const fs::path out = dir / "huge.bin";
  // 1024 layers of the 30B-A3B shape with 1024 experts: 5.3 TB, more than a test machine has free. Where a
  // file system does have that much, the check would rightly let it write; the test must not do that.
  if (fs::space(dir).available >= 5'280'536'043'776ull) QTUNE_SKIP("the scratch file system has 5.3 TB free");
  const Run r = qconvert("synthetic --preset qwen3-30b-a3b --layers 1024 --experts 1024 --format moe3 --out " +
                             out.string(), dir);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::Contains("bytes free"));
  CHECK_FALSE(fs::exists(out.string() + ".partial"));
}

// The signal and file-size tests write a 0.6B-shaped model cut to 2 layers and a 4096-token vocabulary: 38 MB
// written in about 0.3 s here, so that they need little of a CI machine's disk (the full 0.6B file is 633 MB,
// more than one CI run had free) and still write for long enough to be stopped part way.
namespace {
const std::string kSmallWrite = "synthetic --preset qwen3-0.6b --layers 2 --vocab 4096 --quiet --format ajc1";
constexpr uint64_t kSmallWriteBytes = 37'902'592;

void skip_without_room(const fs::path& dir) {
  const uint64_t free_bytes = fs::space(dir).available;
  if (free_bytes < 2 * kSmallWriteBytes)
    QTUNE_SKIP("the scratch file system has " + std::to_string(free_bytes) + " bytes free, under the " +
               std::to_string(2 * kSmallWriteBytes) + " this test writes with margin");
}

// Starts qconvert as a direct child with every signal at its default action and none blocked, whatever the
// test runner inherited, no core file (SIGQUIT, SIGXFSZ), and stderr into `err`. Only async-signal-safe calls
// run between fork and exec.
pid_t start_qconvert(const std::string& args, const std::string& err) {
  std::vector<std::string> words;
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  const std::string exe = qt::binary_root() + "/bin/qconvert";
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const struct rlimit no_core {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int null_fd = ::open("/dev/null", O_WRONLY);
  if (err_fd < 0 || null_fd < 0) ::_exit(91);
  ::dup2(err_fd, 2);
  ::dup2(null_fd, 1);
  ::execv(exe.c_str(), argv.data());
  ::_exit(92);
}

int wait_for_end(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}
}  // namespace

TEST_CASE("qconvert cli: every terminating signal while writing removes the partial file", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-out-signal");
  skip_without_room(dir);
  const std::pair<int, const char*> signals[] = {{SIGTERM, "TERM"}, {SIGINT, "INT"},   {SIGHUP, "HUP"},
                                                 {SIGQUIT, "QUIT"}, {SIGPIPE, "PIPE"}, {SIGXFSZ, "XFSZ"},
                                                 {SIGUSR1, "USR1"}, {SIGALRM, "ALRM"}};
  for (const auto& [signo, name] : signals) {
    const fs::path out = dir / (std::string("big-") + name + ".bin");
    const std::string partial = out.string() + ".partial";
    const std::string err = (dir / (std::string("err-") + name + ".txt")).string();
    const pid_t pid = start_qconvert(kSmallWrite + " --out " + out.string(), err);
    REQUIRE(pid > 0);
    // Once the partial file exists the writer is stopped, sent the signal, and continued: the signal is taken
    // part way through the write however fast the machine writes. A direct child and waitpid, not a shell's
    // job control: bash 5.2's `wait -f` once looped for ever on a job it had already reaped.
    bool appeared = false;
    for (int i = 0; i < 2000 && !appeared; ++i) {
      appeared = fs::exists(partial);
      if (!appeared) ::usleep(10'000);
    }
    if (!appeared) ::kill(pid, SIGKILL);
    ::kill(pid, SIGSTOP);
    ::kill(pid, signo);
    ::kill(pid, SIGCONT);
    const int status = wait_for_end(pid);
    INFO("signal " << name << "; qconvert said: " << slurp(err));
    REQUIRE(appeared);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signo);  // the process died of the signal it was sent, after cleaning up
    CHECK_FALSE(fs::exists(partial));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("qconvert cli: a file-size limit reached while writing removes the partial file", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-out-fsize");
  skip_without_room(dir);
  const fs::path out = dir / "limited.bin";
  const std::string err = (dir / "err.txt").string();
  // 4 MiB of file size allowed (ulimit -f counts 1024-byte blocks): the kernel sends SIGXFSZ at the write
  // that crosses it.
  const std::string cmd = "ulimit -c 0; ulimit -f 4096; " + qt::binary_root() + "/bin/qconvert " + kSmallWrite +
                          " --out " + out.string() + " 2>" + err + "; status=$?; exit $status";
  const int status = std::system(("bash -c '" + cmd + "'").c_str());
  INFO("qconvert said: " << slurp(err));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGXFSZ);
  CHECK_FALSE(fs::exists(out.string() + ".partial"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("qconvert cli: an --out that is a file of the input checkpoint is refused, and the checkpoint kept", "[cli]") {
  const auto dir = qt::test::convert_scratch("cli-out-in-input");
  const std::string hf = (dir / "hf").string();
  REQUIRE(qconvert("synthetic -q --preset tiny --format hf --out " + hf, dir).code == 0);
  for (const char* name : {"model.safetensors", "config.json"}) {
    INFO(name);
    const fs::path target = fs::path(hf) / name;
    const std::string before = slurp(target);
    const Run r = qconvert("convert -q --no-tokenizer --hf " + hf + " --format ajc1 --out " + target.string(), dir);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains("a file of the input checkpoint"));
    CHECK(slurp(target) == before);
  }
  // A new file in the checkpoint's folder is an ordinary output.
  CHECK(qconvert("convert -q --no-tokenizer --hf " + hf + " --format ajc1 --out " + hf + "/model.ajc1", dir).code == 0);
}
