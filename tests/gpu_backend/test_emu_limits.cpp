// The emulator's limits as a user meets them: a model too large for its memory is refused before loading,
// stating what it needs; a shape no kernel family takes is one short line; a long load or forward shows
// progress, a short one prints nothing.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/paths.h"
#include "device/emu/emu_device.h"
#include "models/formats/model_file.h"
#include "runtime/gpu/device_backend.h"
#include "runtime/model/qwen3_model.h"

using namespace std::string_literals;

namespace {

const std::string kFiles = qt::source_root() + "/tests/golden/files/";
const std::string kTmp = qt::binary_root() + "/tests/emu-limits-";

struct Result {
  int code;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result run(const std::string& command_line) {
  const std::string err = kTmp + "err-" + std::to_string(::getpid());
  const int status = std::system((command_line + " >/dev/null 2>" + err).c_str());
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(err)};
  std::filesystem::remove(err);
  return r;
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// What the device backend writes on stderr while it loads `file` and runs `tokens` of it.
std::string backend_stderr(const std::string& file, int tokens, double progress_after_seconds) {
  const auto model = qt::ModelFile::open(kFiles + file);
  qt::emu::EmuOptions eo;
  eo.threads = 2;
  qt::emu::EmuDevice device(eo);
  qt::rt::DeviceBackendOptions o;
  o.store_prefix = "emu.";
  o.progress_after_seconds = progress_after_seconds;
  const std::string path = kTmp + "stderr-" + std::to_string(::getpid());
  std::fflush(stderr);
  const int saved = ::dup(2);
  std::FILE* capture = std::fopen(path.c_str(), "w");
  ::dup2(::fileno(capture), 2);
  {
    qt::rt::DeviceBackend backend(device, o);
    qt::rt::Qwen3Model m(model->weights(), backend, 64);
    m.forward(std::vector<int32_t>(size_t(tokens), 1));
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(capture);
  const std::string text = slurp(path);
  std::filesystem::remove(path);
  return text;
}

}  // namespace

TEST_CASE("A model too large for the emulator's memory is refused before loading, stating what it needs") {
  const std::string qrun = qt::binary_root() + "/bin/qrun --device emu --prompt-ids 1,2,3 -n 1 --model ";
  const std::string model = kFiles + "dense.ajc1";
  const auto file_bytes = std::filesystem::file_size(model);
  // Less than its weights.
  const Result small = run("QTUNE_EMU_MEMORY=100000 " + qrun + model);
  INFO(small.err);
  CHECK(small.code == 2);
  CHECK(lines(small.err) == 1);
  CHECK(small.err.find("emu: the model needs about") != std::string::npos);
  CHECK(small.err.find("of weights") != std::string::npos);
  CHECK(small.err.find("bytes available") != std::string::npos);
  // Room for its weights, not for the race checks of its largest matrix: without them it runs.
  const std::string room = "QTUNE_EMU_MEMORY=" + std::to_string(4 * file_bytes) + " ";
  const Result checked = run(room + qrun + model);
  INFO(checked.err);
  CHECK(checked.code == 2);
  CHECK(lines(checked.err) == 1);
  CHECK(checked.err.find("to check its largest launch for races") != std::string::npos);
  CHECK(checked.err.find("without the race checks (qrun --no-checks) it fits") != std::string::npos);
  CHECK(run(room + qrun + model + " --no-checks").code == 0);
}

TEST_CASE("A group size no kernel family takes is refused in one short line naming the families") {
  const std::string model = kTmp + "g1.ajc1";
  REQUIRE(run(qt::binary_root() + "/bin/qconvert synthetic --preset tiny --group-size 1 --format ajc1 --quiet --out " +
              model).code == 0);
  const Result r = run(qt::binary_root() + "/bin/qrun --device emu --prompt-ids 1,2 -n 1 --model " + model);
  std::filesystem::remove(model);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.size() < 300);  // it was 800 characters: every default point of every family, each with its reason
  CHECK(r.err.find("no kernel family runs op 'linear' on Q8_0") != std::string::npos);
  CHECK(r.err.find("G=1") != std::string::npos);
  CHECK(r.err.find("q8_0_gemv and q8_0_gemm") != std::string::npos);
}

TEST_CASE("A load or forward longer than the progress delay shows progress on stderr, and a shorter one prints nothing") {
  const std::string shown = backend_stderr("dense.ajc1", 5, 1e-9);
  INFO(shown);
  CHECK(shown.find("emu: loading weights:") != std::string::npos);
  CHECK(shown.find("emu: forward of 5 tokens:") != std::string::npos);
  CHECK(shown.find("kernels in") != std::string::npos);  // the final line: how many ran, and in what time
  CHECK(backend_stderr("dense.ajc1", 5, 3600).empty());
}
