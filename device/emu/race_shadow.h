#pragma once
// The happens-before bookkeeping behind race detection, for shared and global memory alike. Within one launch
// two accesses of a byte are ordered when
//   - they come from the same thread (program order), or
//   - they come from one block and a __syncthreads lies between them (the block's barrier epoch differs), or
//   - they come from one warp and a chain of __syncwarp calls leads from the first thread to the second
//     (tracked with vector clocks over the warp's lanes, so any sequence of partial masks is handled).
// Nothing orders accesses of different blocks, except a __threadfence by the first block followed by an
// atomic of the second (the "last block" pattern), and, for the shared memory of a thread block cluster, a
// barrier.cluster between them (each access stamped with the cluster's generation; race_shadow.cpp). Two strong accesses (atomics, volatile) never race.
// Every byte keeps the set of its last writers and the set of its readers since; a set folds its members
// into (block, epoch, warp, lane mask, newest clock). The outcome depends only on which accesses are ordered,
// never on the order the scheduler happened to run them in.
//
// Once a block uses mbarriers, named barriers or asynchronous agents, its threads also carry clocks over
// every thread of the block (block_clocks.h): a set of another warp is then ordered when the accessor knows
// each member's clock, sets spanning several warps keep every warp's members (WarpSets), and the agents
// appear as virtual warps whose accesses no __syncthreads orders, only their completion.
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace qt::emu::exec {

constexpr uint32_t kManyBlocks = 0xFFFFFFFFu;
constexpr uint16_t kManyWarps = 0xFFFF;

// Who is accessing, and what it knows: its lane's vector clock over the warp (`vc[l]` = the newest
// __syncwarp serial of lane l that happens before this point; vc[lane] is the lane's own).
class WarpSets;

struct Accessor {
  uint32_t block;  // 1 + linear block index
  uint32_t epoch;  // the block's barrier interval
  uint16_t warp;
  uint8_t lane;
  bool strong;             // atomic or volatile
  const uint32_t* vc;      // 32 entries
  uint32_t atomic_time;    // launch time of this thread's newest atomic (0: none)
  // With the block's clocks on (block_clocks.h), else null / kNoVirtualWarps:
  const uint32_t* row = nullptr;  // what the accessor knows of every thread and agent: warp w at row + 32 w
  WarpSets* sets = nullptr;
  uint16_t first_virtual = 0xFFFF;  // warps from here on are asynchronous agents
  uint32_t first_epoch = 0;         // the block's first interval: older sets belong to earlier blocks
  bool async_proxy = false;         // a read by the async proxy: a __syncthreads alone does not order writes before it
  // Shared memory of a cluster launch: the cluster generation whose barrier.cluster this thread passed last (0:
  // none). Accesses of other CTAs stamped with an earlier generation are ordered before it.
  uint32_t cluster_passed = 0;
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

// Sets of one block's accesses spanning several warps while its clocks are on: each warp's lanes, epoch and
// newest clock, interned, so that a cell names the whole set by one id (AccessSet::clk, tagged, with
// warp == kManyWarps). Members ordered before a newcomer are dropped. Valid for one block.
class WarpSets {
 public:
  static constexpr uint32_t kTag = 0x80000000u;
  // The tagged id of the set `s` plus the access `a` (`s` and `a` of one block, `s` not ordered before `a`).
  uint32_t join(const AccessSet& s, const Accessor& a);
  bool ordered(uint32_t tagged_id, const Accessor& a) const;
  void clear();

 private:
  struct Member {
    uint32_t epoch, lanes, clk;
    uint16_t warp;
    bool operator==(const Member&) const = default;
  };
  uint32_t intern(std::vector<Member>& members);
  std::vector<std::vector<Member>> sets_;
  std::unordered_multimap<uint64_t, uint32_t> by_hash_;
  struct Memo {
    uint32_t from = 0, clk = 0, epoch = 0, to = 0;
    uint16_t warp = 0;
    uint8_t lane = 0;
  };
  Memo memo_[64];
};

}  // namespace qt::emu::exec
