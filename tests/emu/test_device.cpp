// The emu device as a dev::Device: memory, launch validation, index decomposition, JIT cache and clear errors
// for bad kernels and bad calls.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "tests/emu/emu_test_util.h"

using namespace qt;
using Catch::Matchers::Contains;
using dev::Buffer;
using dev::KernelArgs;

namespace {

const char* kIndexSource = R"(
#include "kernels_src/common/qt_cuda.h"
// out[global linear thread id] = packed (block x,y,z, thread x,y,z); the dims go to out_dims.
__global__ void k_index(unsigned* out, unsigned* out_dims) {
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
  out[b * nt + t] = (blockIdx.x << 25) | (blockIdx.y << 20) | (blockIdx.z << 15) | (threadIdx.x << 10) |
                    (threadIdx.y << 5) | threadIdx.z;
  if (b == 0 && t == 0) {
    out_dims[0] = gridDim.x; out_dims[1] = gridDim.y; out_dims[2] = gridDim.z;
    out_dims[3] = blockDim.x; out_dims[4] = blockDim.y; out_dims[5] = blockDim.z;
  }
}
// Reads one value (used after the buffer is freed).
__global__ void k_read(const float* p, float* out) { out[0] = p[0] + SCALE; }
// 40 KiB of static shared memory, to be combined with dynamic shared memory at launch.
__global__ void k_big_shared(float* out) {
  QT_SHARED(buf, float[10240]);
  buf[threadIdx.x] = 1.0f;
  out[threadIdx.x] = buf[threadIdx.x];
}
// An atomic at an arbitrary address (a wild pointer just below 2^64, where addr + 4 wraps to 0).
__global__ void k_atomic_at(unsigned long long addr) { atomicAdd(reinterpret_cast<int*>(addr), 1); }
)";

dev::ModuleSource index_module(const char* scale = "1.0f") {
  dev::ModuleSource s;
  s.name = "index_test.cu";
  s.source = kIndexSource;
  s.kernels = {"k_index", "k_read", "k_atomic_at", "k_big_shared"};
  s.defines = {{"SCALE", scale}};
  return s;
}

}  // namespace

TEST_CASE("grid and block indices decompose x fastest, then y, then z") {
  auto& dev = emu::test::device();
  auto mod = dev.load_module(index_module());
  const dev::Dim3 grid{3, 2, 2}, block{4, 3, 2};
  const size_t total = grid.count() * block.count();
  Buffer out(dev, total * 4), dims(dev, 6 * 4);
  dev.launch(mod->kernel("k_index"), {grid, block, 0}, KernelArgs().add(out.ptr()).add(dims.ptr()));
  const auto r = out.download<unsigned>(total);
  size_t i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx)
              REQUIRE(r[i++] == ((bx << 25) | (by << 20) | (bz << 15) | (tx << 10) | (ty << 5) | tz));
  CHECK(dims.download<unsigned>(6) == std::vector<unsigned>{3, 2, 2, 4, 3, 2});
}

TEST_CASE("the JIT cache is hit for the same module and missed when a define changes") {
  auto& dev = emu::test::device();
  dev.load_module(index_module());
  dev.load_module(index_module());
  CHECK(dev.last_jit().cache_hit);
  const std::string key = dev.last_jit().key;
  dev.load_module(index_module("2.0f"));
  CHECK(dev.last_jit().key != key);
}

TEST_CASE("fresh device memory is 0xFF garbage and host copies are bounds-checked") {
  auto& dev = emu::test::device();
  Buffer b(dev, 10);
  const auto bytes = b.download<uint8_t>(10);
  for (uint8_t v : bytes) CHECK(v == 0xFF);
  std::vector<uint8_t> big(11, 0);
  CHECK_THROWS_WITH(dev.copy_to_device(b.ptr(), big.data(), 11), Contains("outside every live device allocation"));
  CHECK_THROWS_WITH(dev.free(b.ptr().offset(4)), Contains("not a live device allocation"));
}

TEST_CASE("sizes near 2^64 are refused, never wrapped into a small size that passes the checks") {
  auto& dev = emu::test::device();
  Buffer b(dev, 16);
  std::vector<uint8_t> host(16, 0);
  CHECK_THROWS_WITH(dev.copy_to_device(b.ptr().offset(8), host.data(), SIZE_MAX - 4),
                    Contains("outside every live device allocation"));
  CHECK_THROWS_WITH(dev.copy_to_host(host.data(), b.ptr(), SIZE_MAX), Contains("outside every live device allocation"));
  CHECK_THROWS_WITH(b.download<uint32_t>(SIZE_MAX / 4 + 2), Contains("exceeds the buffer's 16 bytes"));
  CHECK_THROWS_WITH(dev.allocate(SIZE_MAX - 7), Contains("device address space"));
  auto mod = dev.load_module(index_module());
  CHECK_THROWS_WITH(dev.launch(mod->kernel("k_atomic_at"), {{1}, {1}, 0}, KernelArgs().add(~uint64_t{0} - 3)),
                    Contains("out-of-bounds global write of 4 byte(s) at 0xfffffffffffffffc"));
}

TEST_CASE("a kernel reading freed memory is reported") {
  auto& dev = emu::test::device();
  auto mod = dev.load_module(index_module());
  dev::DevPtr p = dev.allocate(64);
  dev.free(p);
  Buffer out(dev, 4);
  CHECK_THROWS_WITH(dev.launch(mod->kernel("k_read"), {{1}, {1}, 0}, KernelArgs().add(p).add(out.ptr())),
                    Contains("out-of-bounds global read of 4 byte(s)") && Contains("freed allocation"));
}

TEST_CASE("launches with wrong arguments or impossible configurations are refused") {
  auto& dev = emu::test::device();
  auto mod = dev.load_module(index_module());
  Buffer out(dev, 64);
  CHECK_THROWS_WITH(dev.launch(mod->kernel("k_index"), {{1}, {32}, 0}, KernelArgs().add(out.ptr())),
                    Contains("with 1 arguments; the kernel takes 2"));
  CHECK_THROWS_WITH(dev.launch(mod->kernel("k_index"), {{1}, {32}, 0}, KernelArgs().add(out.ptr()).add(3)),
                    Contains("argument 1 has 4 bytes, the kernel's parameter has 8"));
  CHECK_THROWS_WITH(dev.launch(mod->kernel("k_index"), {{1}, {1025}, 0}, KernelArgs().add(out.ptr()).add(out.ptr())),
                    Contains("more than 1024 threads"));
  CHECK_THROWS_WITH(mod->kernel("k_nope"), Contains("has no kernel 'k_nope'"));
}

TEST_CASE("static plus dynamic shared memory above 227 KiB per block is refused, each part alone is not") {
  auto& dev = emu::test::device();
  auto mod = dev.load_module(index_module());
  Buffer out(dev, 32 * 4);
  dev.launch(mod->kernel("k_big_shared"), {{1}, {32}, 187 * 1024}, KernelArgs().add(out.ptr()));
  CHECK(out.download<float>(32)[31] == 1.0f);
  CHECK_THROWS_WITH(dev.launch(mod->kernel("k_big_shared"), {{1}, {32}, 188 * 1024}, KernelArgs().add(out.ptr())),
                    Contains("static shared memory (40960 bytes after this request) plus the launch's 192512 bytes") &&
                        Contains("exceed 227 KiB per block"));
}

TEST_CASE("compile errors and raw __shared__ are reported with the compiler's message") {
  auto& dev = emu::test::device();
  dev::ModuleSource s;
  s.name = "broken.cu";
  s.kernels = {"k"};
  s.source = "#include \"kernels_src/common/qt_cuda.h\"\n__global__ void k(int* p) { p[0] = undefined_name; }\n";
  CHECK_THROWS_WITH(dev.load_module(s), Contains("compiling kernel module 'broken.cu' failed") &&
                                            Contains("broken.cu:2") && Contains("undefined_name"));
  s.source = "#include \"kernels_src/common/qt_cuda.h\"\n__global__ void k(int* p) { __shared__ int x[4]; x[0] = 1; p[0] = x[0]; }\n";
  CHECK_THROWS_WITH(dev.load_module(s), Contains("QT_SHARED"));
}

TEST_CASE("name, fingerprint and arch describe the emulator") {
  auto& dev = emu::test::device();
  CHECK(dev.arch() == 80);
  CHECK(dev.store_fingerprint().name == "emu");
  CHECK(dev.store_fingerprint().arch == "sm_" + std::to_string(dev.arch()));
  CHECK_THAT(dev.name(), Contains("emu (") && Contains("checks on"));
}
