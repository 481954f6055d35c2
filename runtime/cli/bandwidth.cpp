#include "runtime/cli/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "common/large_pages.h"
#include "kernels_src/cpu_matvec/thread_pool.h"

namespace qt::rt {

namespace {

// The sum at the widest vectors this CPU has (the compiler makes one copy per target and picks at load
// time), as the matmul kernels read weights: built for the baseline x86-64 only, the loop reads a third
// slower on one thread, and decode would then run above its own roofline.
__attribute__((target_clones("avx512f", "avx2", "default")))
uint64_t sum_words(const uint64_t* a, int64_t n) {
  // Integer sums vectorize without reassociation flags, so the loop is bound by memory, not adds.
  uint64_t acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += a[i];
  return acc;
}

}  // namespace

BandwidthResult measure_bandwidth(ThreadPool& pool, uint64_t buffer_bytes, int repetitions) {
  const int64_t n = int64_t(buffer_bytes / sizeof(uint64_t));
  // The same memory as the repacked weights (huge pages where the kernel gives them): read through 4 KiB
  // pages, the loop is slower than the kernels, and the roofline would understate what decode can reach.
  LargePageBuffer a_mem(size_t(n) * sizeof(uint64_t)), b_mem(size_t(n) * sizeof(uint64_t));
  uint64_t* a = reinterpret_cast<uint64_t*>(a_mem.data());
  uint64_t* b = reinterpret_cast<uint64_t*>(b_mem.data());
  const int64_t chunk = 1 << 15;
  pool.parallel_for(n, chunk, [&](int64_t i0, int64_t i1) {  // first touch by the threads that will read
    for (int64_t i = i0; i < i1; ++i) {
      a[i] = uint64_t(i) * 0x9E3779B97F4A7C15ull;
      b[i] = 0;
    }
  });
  BandwidthResult r;
  r.buffer_bytes = uint64_t(n) * sizeof(uint64_t);
  std::atomic<uint64_t> sink{0};
  for (int rep = 0; rep < repetitions; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, chunk, [&](int64_t i0, int64_t i1) {
      sink.fetch_add(sum_words(a + i0, i1 - i0), std::memory_order_relaxed);
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.read_gbps = std::max(r.read_gbps, double(r.buffer_bytes) / s / 1e9);

    t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, chunk, [&](int64_t i0, int64_t i1) {
      std::memcpy(b + i0, a + i0, size_t(i1 - i0) * sizeof(uint64_t));
    });
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.copy_gbps = std::max(r.copy_gbps, 2.0 * double(r.buffer_bytes) / s / 1e9);
  }
  // Publishing the checksum keeps the compiler from dropping the reads.
  r.checksum = sink.load() ^ b[n / 2];
  return r;
}

}  // namespace qt::rt
