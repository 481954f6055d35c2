#pragma once
// The happens-before bookkeeping behind race detection, for shared and global memory alike. Within one launch
// two accesses of a byte are ordered when
//   - they come from the same thread (program order), or
//   - they come from one block and a __syncthreads lies between them (the block's barrier epoch differs), or
//   - they come from one warp and a chain of __syncwarp calls leads from the first thread to the second
//     (tracked with vector clocks over the warp's lanes, so any sequence of partial masks is handled).
// Nothing orders accesses of different blocks, except a __threadfence by the first block followed by an
// atomic of the second (the "last block" pattern). Two strong accesses (atomics, volatile) never race.
// Every byte keeps the set of its last writers and the set of its readers since; a set folds its members
// into (block, epoch, warp, lane mask, newest clock). The outcome depends only on which accesses are ordered,
// never on the order the scheduler happened to run them in.
#include <cstdint>

namespace qt::emu::exec {

constexpr uint32_t kManyBlocks = 0xFFFFFFFFu;
constexpr uint16_t kManyWarps = 0xFFFF;

// Who is accessing, and what it knows: its lane's vector clock over the warp (`vc[l]` = the newest
// __syncwarp serial of lane l that happens before this point; vc[lane] is the lane's own).
struct Accessor {
  uint32_t block;  // 1 + linear block index
  uint32_t epoch;  // the block's barrier interval
  uint16_t warp;
  uint8_t lane;
  bool strong;             // atomic or volatile
  const uint32_t* vc;      // 32 entries
  uint32_t atomic_time;    // launch time of this thread's newest atomic (0: none)
};

struct AccessSet {
  uint64_t loc = 0;    // where the newest member accessed (a code address or a site id; see memory_checks)
  uint32_t block = 0;  // 0: empty
  uint32_t epoch = 0;
  uint32_t clk = 0;    // newest own clock of the members at their access
  uint32_t lanes = 0;  // members' lanes when all are in `warp`
  uint16_t warp = 0;   // or kManyWarps
  uint8_t strong = 0;  // every member strong
  uint32_t time = 0;   // launch time (fences and atomics tick it) of the newest member access
};

struct Cell {
  AccessSet w, r;
};

// Cross-block ordering: did the block that made an access at `time` issue a __threadfence after it, before
// `until`? Answered by the launch (global memory); shared memory never needs it.
struct FenceLog {
  virtual ~FenceLog() = default;
  virtual bool fenced_between(uint32_t block, uint32_t after, uint32_t before) const = 0;
};

// Is every member of `s` ordered before an access by `a`? `fences` may be null (shared memory).
bool ordered_before(const AccessSet& s, const Accessor& a, const FenceLog* fences);

// The result of one byte's check: 0 = fine, else which set conflicted.
enum class Conflict : uint8_t { kNone, kWrite, kRead };

// Checks an access of one byte against its cell and records it. A write replaces the writers (a strong
// write joins strong writers of the same interval) and clears the readers; a read joins the readers.
Conflict check_and_record(Cell& c, const Accessor& a, bool write, uint32_t now, uint64_t loc, const FenceLog* fences);

// The one member of a set, or false when it has several (reports then say "several threads ...").
bool single_member(const AccessSet& s, uint32_t& block, uint32_t& tid);

}  // namespace qt::emu::exec
