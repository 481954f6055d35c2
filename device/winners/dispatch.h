#pragma once
// Dispatch by batch size, learned per linear shape. For each (device, op, weight type, shape without M) the
// tuner stores, per batch bucket M, the families that were measured there ranked fastest first; the
// crossovers (the M where the leader changes, e.g. GEMV -> tensor-core GEMM) follow from the ranking. The
// runtime reads the ranking of the bucket a batch falls in and runs its first family that can run here.
//
// Family names in a ranking are store names ("cuda.awq_gemv"). A contender that is no registry family (the
// dequant + cuBLAS path, "cuda.blas.dequant_f16" for example) is stored and ranked the same way; a runtime
// that cannot run it takes the next one.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device/winners/fingerprint.h"

struct sqlite3;

namespace qt::winners {

// The batch buckets tuned by default: 1, 2, 4, ..., 4096.
std::vector<int64_t> default_batch_buckets();

struct Ranked {
  std::string family;
  double median_s = 0;
};

struct DispatchEntry {
  int64_t bucket = 0;            // M
  std::vector<Ranked> ranking;   // fastest first
};

// A change of leader between consecutive buckets: from `below` (fastest up to the previous bucket) to
// `above` (fastest from bucket `m` on).
struct Crossover {
  int64_t m = 0;
  std::string below, above;
};

// Entries in any order; crossovers in increasing M.
std::vector<Crossover> crossovers(std::vector<DispatchEntry> entries);

// The bucket that serves a batch of `m` rows among `buckets`: the smallest bucket >= m, else the largest.
int64_t bucket_for(const std::vector<int64_t>& buckets, int64_t m);

// Creates the dispatch table if missing (writers only).
void create_dispatch_schema(sqlite3* db);
// Replaces the entries of one (device, op, weight type, rest) key.
void put_dispatch(sqlite3* db, const DeviceFingerprint& dev, const std::string& op, const std::string& weight_type,
                  const std::vector<int64_t>& rest, const std::vector<DispatchEntry>& entries, const std::string& run_id);
// Every stored entry of the key, in increasing M; empty when nothing was stored (or the store predates the table).
std::vector<DispatchEntry> read_dispatch(sqlite3* db, const DeviceFingerprint& dev, const std::string& op,
                                         const std::string& weight_type, const std::vector<int64_t>& rest);

}  // namespace qt::winners
