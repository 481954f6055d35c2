// Failures the access checks cannot turn into a qt::Error still name the kernel, block and thread before
// the process dies: a fiber stack overflow. Run in a forked child whose stderr the test reads.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "tests/emu/emu_test_util.h"

using namespace qt;
using Catch::Matchers::Contains;

namespace {

const char* kDeepSource = R"(
#include "kernels_src/common/qt_cuda.h"
// A 400 KiB local array: more than a fiber's stack.
__global__ void k_deep(int* out) {
  volatile char big[400 * 1024];
  for (unsigned i = 0; i < sizeof(big); i += 4096) big[i] = static_cast<char>(i);
  out[threadIdx.x] = big[threadIdx.x * 4096];
}
)";

// Runs `body` in a child process; returns (exit status, stderr text).
template <class F>
std::pair<int, std::string> run_in_child(F&& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], 2);
    // The test framework's own crash report (on stdout) belongs to the child: drop it.
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, 1);
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {status, text};
}

}  // namespace

TEST_CASE("a fiber stack overflow names the kernel, block and thread before the process dies") {
  dev::ModuleSource src;
  src.name = "deep.cu";
  src.source = kDeepSource;
  src.kernels = {"k_deep"};
  auto& dev = emu::test::device();
  auto mod = dev.load_module(src);  // compiled in the parent, so the child only launches
  dev::Buffer out(dev, 64 * 4);
  const auto [status, err] = run_in_child([&] {
    dev.launch(mod->kernel("k_deep"), {{1}, {2}, 0}, dev::KernelArgs().add(out.ptr()));
  });
  INFO(err);
  CHECK(status != 0);
  CHECK_THAT(err, Contains("emu: kernel k_deep: block (0,0,0) thread (") && Contains("fiber stack overflow"));
}
