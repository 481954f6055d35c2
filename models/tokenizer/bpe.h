#pragma once
// Byte-level BPE core (internal): the merge table as an open-addressing hash from an adjacent id pair to
// (rank, merged id), the merge loop (lowest rank first, leftmost on ties, as HF's BPE model), and a
// per-thread cache of piece -> ids so repeated words cost one hash lookup.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qt::tok {

class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  void build(const std::vector<std::pair<int32_t, int32_t>>& pairs, const std::vector<int32_t>& merged);
  // Rank and merged id of the pair, or rank == INT32_MAX when the pair never merges.
  Merge find(int32_t left, int32_t right) const {
    uint64_t key = pack(left, right);
    size_t i = hash(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return {s.rank, s.merged};
      if (s.key == kEmpty) return {INT32_MAX, -1};
      i = (i + 1) & mask_;
    }
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 29;
    return k;
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// Runs BPE over the bytes of one pre-token and appends the ids. `byte_ids` maps each byte to the id of its
// single-byte token.
void bpe_merge(std::string_view piece, const int32_t* byte_ids, const MergeTable& merges, std::vector<int32_t>& out);
// The straightforward O(n^2) loop and the heap-based loop, exposed so tests can check they agree.
void bpe_merge_small(std::string_view piece, const int32_t* byte_ids, const MergeTable& merges,
                     std::vector<int32_t>& out);
void bpe_merge_heap(std::string_view piece, const int32_t* byte_ids, const MergeTable& merges,
                    std::vector<int32_t>& out);

// Piece -> ids memo. Bounded: cleared wholesale when full (cheap, and word frequencies are Zipfian).
class PieceCache {
 public:
  PieceCache();
  // Returns true and appends the ids when `piece` is cached.
  bool lookup(std::string_view piece, uint64_t h, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, uint64_t h, const int32_t* ids, size_t n);
  static uint64_t hash(std::string_view piece);
  static constexpr size_t kMaxPieceBytes = 128;

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, val_off = 0;
    uint16_t key_len = 0, val_len = 0;
    bool used = false;
  };
  void clear();
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> values_;
  size_t count_ = 0;
};

}  // namespace qt::tok
