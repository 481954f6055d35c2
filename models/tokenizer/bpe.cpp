#include "models/tokenizer/bpe.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <queue>

#include "common/error.h"

namespace qt::tok {

void MergeTable::build(const std::vector<std::pair<int32_t, int32_t>>& pairs, const std::vector<int32_t>& merged) {
  size_t cap = 16;
  while (cap < pairs.size() * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  count_ = 0;
  for (size_t r = 0; r < pairs.size(); ++r) {
    uint64_t key = pack(pairs[r].first, pairs[r].second);
    size_t i = hash(key) & mask_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    // A pair listed twice takes its last rank: HF collects the merges into a HashMap, where a later entry
    // replaces an earlier one.
    if (slots_[i].key != key) ++count_;
    slots_[i] = Slot{key, static_cast<int32_t>(r), merged[r]};
  }
}

void bpe_merge_small(std::string_view piece, const int32_t* byte_ids, const MergeTable& merges,
                     std::vector<int32_t>& out) {
  const size_t n = piece.size();
  constexpr size_t kStack = 256;
  int32_t ids_buf[kStack];
  MergeTable::Merge m_buf[kStack];
  std::vector<int32_t> ids_heap;
  std::vector<MergeTable::Merge> m_heap;
  int32_t* ids = ids_buf;
  MergeTable::Merge* pair = m_buf;
  if (n > kStack) {
    ids_heap.resize(n);
    m_heap.resize(n);
    ids = ids_heap.data();
    pair = m_heap.data();
  }
  for (size_t i = 0; i < n; ++i) ids[i] = byte_ids[static_cast<unsigned char>(piece[i])];
  size_t len = n;
  for (size_t i = 0; i + 1 < len; ++i) pair[i] = merges.find(ids[i], ids[i + 1]);
  while (len > 1) {
    size_t best = 0;
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < len; ++i) {
      if (pair[i].rank < best_rank) {
        best_rank = pair[i].rank;
        best = i;
      }
    }
    if (best_rank == INT32_MAX) break;
    ids[best] = pair[best].merged;
    // Close the gap left by ids[best + 1] and its pair entry.
    std::memmove(ids + best + 1, ids + best + 2, (len - best - 2) * sizeof(int32_t));
    if (best + 1 < len - 1) std::memmove(pair + best, pair + best + 1, (len - best - 2) * sizeof(pair[0]));
    --len;
    if (best > 0) pair[best - 1] = merges.find(ids[best - 1], ids[best]);
    if (best + 1 < len) pair[best] = merges.find(ids[best], ids[best + 1]);
  }
  out.insert(out.end(), ids, ids + len);
}

void bpe_merge_heap(std::string_view piece, const int32_t* byte_ids, const MergeTable& merges,
                    std::vector<int32_t>& out) {
  const int32_t n = static_cast<int32_t>(piece.size());
  struct Sym {
    int32_t id, prev, next;
  };
  std::vector<Sym> sym(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) sym[static_cast<size_t>(i)] = {byte_ids[static_cast<unsigned char>(piece[static_cast<size_t>(i)])], i - 1, i + 1 < n ? i + 1 : -1};
  struct Cand {
    int32_t rank, pos, left_id, right_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t pos) {
    int32_t nx = sym[static_cast<size_t>(pos)].next;
    if (nx < 0) return;
    auto m = merges.find(sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(nx)].id);
    if (m.rank != INT32_MAX) heap.push({m.rank, pos, sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(nx)].id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& s = sym[static_cast<size_t>(c.pos)];
    // Stale entry: this symbol was absorbed or its right neighbour changed since the pair was queued.
    if (s.id != c.left_id || s.next < 0 || sym[static_cast<size_t>(s.next)].id != c.right_id) continue;
    if (s.id < 0) continue;
    int32_t right = s.next;
    s.id = merges.find(c.left_id, c.right_id).merged;
    Sym& r = sym[static_cast<size_t>(right)];
    s.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = c.pos;
    r.id = -1;
    if (s.prev >= 0) push(s.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = sym[static_cast<size_t>(i)].next) out.push_back(sym[static_cast<size_t>(i)].id);
}

void bpe_merge(std::string_view piece, const int32_t* byte_ids, const MergeTable& merges, std::vector<int32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(byte_ids[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (piece.size() <= 96) {
    bpe_merge_small(piece, byte_ids, merges, out);
  } else {
    bpe_merge_heap(piece, byte_ids, merges, out);
  }
}

namespace {
constexpr size_t kCacheSlots = 1 << 15;
constexpr size_t kCacheMaxEntries = kCacheSlots / 2;
}  // namespace

PieceCache::PieceCache() { slots_.resize(kCacheSlots); }

uint64_t PieceCache::hash(std::string_view p) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ p.size();
  size_t i = 0;
  for (; i + 8 <= p.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, p.data() + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p.data() + i, p.size() - i);
  h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 29;
  return h;
}

bool PieceCache::lookup(std::string_view piece, uint64_t h, std::vector<int32_t>& out) const {
  size_t i = h & (kCacheSlots - 1);
  while (slots_[i].used) {
    const Slot& s = slots_[i];
    if (s.hash == h && s.key_len == piece.size() && std::memcmp(keys_.data() + s.key_off, piece.data(), piece.size()) == 0) {
      out.insert(out.end(), values_.begin() + s.val_off, values_.begin() + s.val_off + s.val_len);
      return true;
    }
    i = (i + 1) & (kCacheSlots - 1);
  }
  return false;
}

void PieceCache::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  keys_.clear();
  values_.clear();
  count_ = 0;
}

void PieceCache::insert(std::string_view piece, uint64_t h, const int32_t* ids, size_t n) {
  if (piece.size() > kMaxPieceBytes) return;
  if (count_ >= kCacheMaxEntries) clear();
  size_t i = h & (kCacheSlots - 1);
  while (slots_[i].used) i = (i + 1) & (kCacheSlots - 1);
  Slot& s = slots_[i];
  s.used = true;
  s.hash = h;
  s.key_off = static_cast<uint32_t>(keys_.size());
  s.key_len = static_cast<uint16_t>(piece.size());
  s.val_off = static_cast<uint32_t>(values_.size());
  s.val_len = static_cast<uint16_t>(n);
  keys_.append(piece);
  values_.insert(values_.end(), ids, ids + n);
  ++count_;
}

}  // namespace qt::tok
