#pragma once
// A STREAM-like measurement of how fast this machine reads memory with a given number of threads: the
// denominator of the decode roofline (a decode step streams every weight once).
#include <cstdint>

namespace qt::rt {

class ThreadPool;

struct BandwidthResult {
  double read_gbps = 0;   // sum over a buffer far larger than the caches (best of the repetitions)
  double copy_gbps = 0;   // a = b (read + write bytes counted)
  uint64_t buffer_bytes = 0;
  uint64_t checksum = 0;  // of the data read; meaningless except that it depends on every read
};

BandwidthResult measure_bandwidth(ThreadPool& pool, uint64_t buffer_bytes, int repetitions);

}  // namespace qt::rt
