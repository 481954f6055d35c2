// The emulator's memory as a GPU's: an allocation past it, and a launch whose race checks need more than is
// left, each end in one qt::Error naming the sizes (exit 1), never in std::terminate or the kernel's
// out-of-memory killer, and the device stays usable afterwards.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "device/emu/arena.h"
#include "tests/emu/emu_test_util.h"

using namespace qt;
using Catch::Matchers::Contains;

namespace {

const char* kFillSource = R"(
#include "kernels_src/common/qt_cuda.h"
__global__ void k_fill(float* p, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 1.0f;
}
)";

// A device whose memory is what is allocated now plus `extra` bytes.
emu::EmuOptions with_memory(uint64_t extra) {
  emu::EmuOptions o = emu::test::test_options();
  o.threads = 2;
  o.memory_bytes = emu::Arena::instance().live_bytes() + extra;
  return o;
}

}  // namespace

TEST_CASE("An allocation past the emulator's memory is one error naming the sizes, and smaller ones still work") {
  emu::EmuDevice dev(with_memory(1 << 20));
  try {
    dev::Buffer too_big(dev, 2 << 20);
    FAIL("allocated past the emulator's memory");
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitFailure);
    CHECK_THAT(e.what(), Contains("emu: out of device memory: 2.1 MB asked for"));
    CHECK_THAT(e.what(), Contains("of the emulator's"));
  }
  dev::Buffer fits(dev, 512 << 10);
  CHECK(fits.bytes() == size_t(512 << 10));
}

TEST_CASE("A launch whose race checks need more than the memory left fails in one line, and the next launch runs") {
  // 1 MiB of floats written by as many threads: the race checks keep a 64-byte cell per byte touched, 64 MiB
  // for the whole buffer, against 8 MiB left.
  const unsigned n = 1 << 18;
  emu::EmuDevice dev(with_memory((uint64_t(n) * 4) + (8 << 20)));
  dev::ModuleSource src;
  src.name = "fill.cu";
  src.source = kFillSource;
  src.kernels = {"k_fill"};
  auto mod = dev.load_module(src);
  dev::Buffer buf(dev, size_t(n) * 4);
  try {
    dev.launch(mod->kernel("k_fill"), {{n / 256, 1, 1}, {256, 1, 1}, 0}, dev::KernelArgs().add(buf.ptr()).add(n));
    FAIL("the launch ran past the emulator's memory");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(e.exit_code() == kExitFailure);
    CHECK_THAT(m, Contains("emu: kernel k_fill: the race checks need more than"));
    CHECK_THAT(m, Contains("left of the emulator's memory"));
    CHECK(m.find('\n') == std::string::npos);
  }
  // 16 KiB touched: 1 MiB of cells, within what is left.
  dev.launch(mod->kernel("k_fill"), {{16, 1, 1}, {256, 1, 1}, 0}, dev::KernelArgs().add(buf.ptr()).add(4096u));
  CHECK(buf.download<float>(4096)[4095] == 1.0f);
}

TEST_CASE("The emulator's memory and thread settings from the environment are checked, naming them") {
  ::setenv("QTUNE_EMU_MEMORY", "2GB", 1);
  CHECK_THROWS_WITH(emu::EmuDevice(emu::test::test_options()), Contains("QTUNE_EMU_MEMORY='2GB' is not a number"));
  ::unsetenv("QTUNE_EMU_MEMORY");
  // The bound of every --threads flag: a typo must not start a million host threads.
  ::setenv("QTUNE_EMU_THREADS", "1000000", 1);
  CHECK_THROWS_WITH(emu::EmuDevice(emu::test::test_options()),
                    Contains("emu: 1000000 host threads is out of range (1..1024)"));
  ::unsetenv("QTUNE_EMU_THREADS");
}
