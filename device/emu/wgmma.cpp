#include "device/emu/wgmma.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "device/emu/async_ops.h"
#include "device/emu/block_scheduler.h"
#include "device/emu/bug_reports.h"
#include "device/emu/memory_checks.h"
#include "kernels_src/common/emu_ops.h"

namespace qt::emu::exec {

namespace {

// A thread lends its accumulators and A fragments to the wgmma: local arrays, on its own fiber stack.
bool on_own_stack(const Fiber* f, uintptr_t p) {
  const uintptr_t region = ~(kFiberRegionBytes - 1);
  return (p & region) == (reinterpret_cast<uintptr_t>(f->ctx) & region);
}

// The access hooks forward what lies in [smem_lo, smem_lo + smem_span): the shared window with its guard
// bands, widened to the thread's lent registers (kernels without wgmma pay nothing for them).
void forward_lent_registers(Fiber* f) {
  uintptr_t lo = f->w->window_lo(), hi = f->w->window_hi();
  for (const WgmmaInFlight& op : async_of(f).wgmma) {
    for (const RegRange& r : {op.d, op.a}) {
      if (r.bytes == 0) continue;
      lo = std::min(lo, r.lo);
      hi = std::max(hi, r.lo + r.bytes);
    }
  }
  for (const RegRange& r : async_of(f).lent) {
    lo = std::min(lo, r.lo);
    hi = std::max(hi, r.lo + r.bytes);
  }
  f->ctx->smem_lo = lo;
  f->ctx->smem_span = hi - lo;
}

// Registers of a retired wgmma stay watched for the wgmma_fence rule; a few recent ones are enough (loops
// reuse the same arrays).
constexpr size_t kLentRanges = 16;
void lend(Fiber* f, const RegRange& r) {
  if (r.bytes == 0) return;
  auto& lent = async_of(f).lent;
  for (const RegRange& x : lent) {
    if (x.lo == r.lo && x.bytes == r.bytes) return;
  }
  if (lent.size() == kLentRanges) lent.erase(lent.begin());
  lent.push_back(r);
}

std::string describe_desc(const WgmmaDescFields& d) {
  static const char* names[] = {"no swizzle", "128B swizzle", "64B swizzle", "32B swizzle"};
  return fmt("descriptor (start %u, LBO %u, SBO %u, %s)", d.start, d.lbo, d.sbo, names[d.swizzle & 3]);
}

// The descriptor of an operand of `rows` (64 for A, N for B) x 16 elements must describe a canonical layout
// the emulator reads the way the hardware does: base offset 0 with the swizzle pattern starting at its
// boundary, and atoms placed at multiples of the pattern.
void check_operand_desc(Fiber* reporter, const WgmmaDescFields& d, bool mn_major, uint32_t rows, const char* operand,
                        const Site* site) {
  if (d.base_offset != 0) {
    fail_at(reporter, site, fmt("wgmma.mma_async: %s %s has base offset %u; wgmma_desc builds descriptors with "
                                "base offset 0", operand, describe_desc(d).c_str(), d.base_offset));
  }
  if (d.swizzle == kSwizzleNone) return;
  const uint32_t row = wgmma_swizzle_row_bytes(d.swizzle), pattern = 8 * row;
  if ((d.start & (pattern - 1)) >= row) {
    fail_at(reporter, site, fmt("wgmma.mma_async: %s %s: the start address lies in row %u of a %u-byte swizzle "
                                "pattern; with base offset 0 it must lie in its first row (the pattern starting at "
                                "a %u-byte boundary)",
                                operand, describe_desc(d).c_str(), (d.start & (pattern - 1)) / row, pattern, pattern));
  }
  // Offsets between swizzle atoms: K-major SBO (rows past 8); MN-major SBO (k 8..15) and LBO (rows past one
  // swizzle row).
  const bool sbo_used = mn_major || rows > 8, lbo_used = mn_major && rows * 2 > row;
  if ((sbo_used && d.sbo % pattern != 0) || (lbo_used && d.lbo % pattern != 0)) {
    fail_at(reporter, site, fmt("wgmma.mma_async: %s %s: the offsets between swizzle atoms must be multiples of the "
                                "%u-byte pattern", operand, describe_desc(d).c_str(), pattern));
  }
}

double element(uint16_t bits, bool bf16) {
  return static_cast<double>(bf16 ? bf16_bits_to_float(bits) : half_bits_to_float(bits));
}

// Reads a 16-bit operand of rows x 16 elements from shared memory through `desc`, as the async proxy agent
// `agent` (a read of warpgroup `group`); out[r * 16 + k].
void read_operand(Fiber* reporter, uint64_t desc, bool mn_major, uint32_t rows, bool bf16, const char* operand,
                  const Accessor& agent, const Accessor& generic, uint32_t group, const Site* site, double* out) {
  Worker& w = *reporter->w;
  const WgmmaDescFields d = wgmma_desc_decode(desc);
  check_operand_desc(reporter, d, mn_major, rows, operand, site);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t k = 0; k < 16; ++k) {
      const uint32_t addr = wgmma_element_address(d, mn_major, r, k);
      if (!smem_valid(w, addr, 2)) {
        fail_at(reporter, site, fmt("wgmma.mma_async: %s element (%u, %u) at %s through %s is out of bounds", operand,
                                    r, k, smem_region(w, addr).c_str(), describe_desc(d).c_str()));
      }
      if (w.L->opts->race_checks) {
        const ShadowHit hit = shadow_cells(reporter, addr, 2, false, agent, nullptr, site, "wgmma.mma_async");
        if (hit.conflict != Conflict::kNone) {
          const bool agent_writer = hit.other.warp != kManyWarps && hit.other.warp >= w.clocks.copy_warp();
          const char* why =
              agent_writer ? "before every thread of the warpgroup waited for the mbarrier phase it completes on"
              : ordered_before(hit.other, generic, nullptr)
                  ? "through the generic proxy with no fence_proxy_async_shared() between the write and the wgmma "
                    "(the writing threads fence after their writes, then a barrier orders the fence before the wgmma)"
                  : "with nothing ordering the write before the wgmma in every thread of the warpgroup (mbarrier "
                    "wait, named barrier or __syncthreads)";
          fail_at(reporter, site, fmt("wgmma.mma_async of warpgroup %u reads %s bytes at %s that %s wrote %s", group,
                                      operand, smem_region(w, hit.off).c_str(),
                                      shared_accessor_name(w, hit.other).c_str(), why));
        }
      }
      uint16_t bits;
      std::memcpy(&bits, w.window + addr, 2);
      out[r * 16 + k] = element(bits, bf16);
    }
  }
}

// Elementwise minimum of the 128 threads' rows: what every thread of the warpgroup knows.
std::vector<uint32_t> warpgroup_knowledge(Worker& w, uint32_t group, bool async) {
  const uint32_t n = w.clocks.width();
  std::vector<uint32_t> meet(n, UINT32_MAX);
  for (uint32_t t = 128 * group; t < 128 * (group + 1); ++t) {
    const uint32_t* row = async ? w.clocks.async_known(t) : w.clocks.known(t);
    for (uint32_t i = 0; i < n; ++i) meet[i] = std::min(meet[i], row[i]);
  }
  return meet;
}

// The collective's results, computed by its last thread for all 128.
void wgmma_results(Fiber* last, uint32_t group, const Site* site) {
  Worker& w = *last->w;
  Fiber* first = &w.fibers[128 * group];
  const WgmmaCall& c = *first->in.wgmma;
  const uint32_t k_group = async_of(first).committed;
  for (uint32_t t = 128 * group + 1; t < 128 * (group + 1); ++t) {
    Fiber* x = &w.fibers[t];
    const WgmmaCall& o = *x->in.wgmma;
    if (o.n != c.n || o.bf16 != c.bf16 || o.trans_a != c.trans_a || o.trans_b != c.trans_b || o.scale_d != c.scale_d ||
        (o.a == nullptr) != (c.a == nullptr) || o.desc_b != c.desc_b || (!c.a && o.desc_a != c.desc_a)) {
      fail_at(x, site, fmt("wgmma.mma_async: this thread's shape, types, scale-d or descriptors differ from thread "
                           "%s's: the warpgroup executes one instruction", dim(w.thread_idx(first->tid)).c_str()));
    }
    if (async_of(x).committed != k_group) {
      fail_at(x, site, fmt("wgmma.mma_async: this thread committed %u wgmma group(s), thread %s %u: "
                           "wgmma_commit_group is executed by the whole warpgroup",
                           async_of(x).committed, dim(w.thread_idx(first->tid)).c_str(), k_group));
    }
  }
  const uint32_t n = c.n;
  const bool bf16 = c.bf16;

  // The async proxy reads on behalf of every thread: it knows what all of them know.
  std::vector<uint32_t> known = warpgroup_knowledge(w, group, false), async_known = warpgroup_knowledge(w, group, true);
  const uint16_t wgmma_warp = w.clocks.wgmma_warp();
  async_known[32 * wgmma_warp + group] = 2 * k_group + 1;
  Accessor agent{kSharedBlock, w.epoch, wgmma_warp, static_cast<uint8_t>(group), false,
                 async_known.data() + 32 * wgmma_warp, 0};
  agent.row = async_known.data();
  agent.sets = &w.clocks.sets;
  agent.first_virtual = w.clocks.copy_warp();
  agent.first_epoch = w.block_first_epoch;
  agent.async_proxy = true;
  Accessor generic = agent;  // the same threads through the generic proxy: tells a missing fence from a race
  generic.row = known.data();
  generic.vc = known.data() + 32 * wgmma_warp;
  generic.async_proxy = false;

  std::vector<double> a(64 * 16), b(256 * 16);
  if (c.a) {
    for (uint32_t t = 0; t < 128; ++t) {
      uint32_t regs[4];
      std::memcpy(regs, w.fibers[128 * group + t].in.wgmma->a, sizeof(regs));
      for (int i = 0; i < 8; ++i) {
        a[wgmma_a_row(t, i) * 16 + wgmma_a_col(t, i)] = element(i % 2 ? hi16(regs[i / 2]) : lo16(regs[i / 2]), bf16);
      }
    }
  } else {
    read_operand(first, c.desc_a, c.trans_a, 64, bf16, "A", agent, generic, group, site, a.data());
  }
  read_operand(first, c.desc_b, c.trans_b, n, bf16, "B", agent, generic, group, site, b.data());

  std::vector<double> product(64 * n);
  for (uint32_t m = 0; m < 64; ++m) {
    for (uint32_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (uint32_t k = 0; k < 16; ++k) acc += a[m * 16 + k] * b[j * 16 + k];
      product[m * n + j] = acc;
    }
  }
  for (uint32_t t = 0; t < 128; ++t) {
    Fiber* x = &w.fibers[128 * group + t];
    const WgmmaCall& o = *x->in.wgmma;
    WgmmaInFlight op;
    op.d = RegRange{reinterpret_cast<uintptr_t>(o.d), 2 * n};
    op.a = o.a ? RegRange{reinterpret_cast<uintptr_t>(o.a), 16} : RegRange{};
    op.n = n;
    op.group = k_group;
    op.site = *site;
    // The input accumulator: a wgmma in flight on the same registers (of the same shape: wgmma_issue checked)
    // chains into this one; else the registers themselves.
    const float* c_in = o.d;
    for (const WgmmaInFlight& prev : async_of(x).wgmma) {
      if (prev.d.lo == op.d.lo) c_in = prev.result;
    }
    for (uint32_t i = 0; i < n / 2; ++i) {
      const double p = product[wgmma_d_row(t, i) * n + wgmma_d_col(t, i)];
      op.result[i] = static_cast<float>(c.scale_d ? p + static_cast<double>(c_in[i]) : p);
    }
    async_of(x).wgmma.push_back(op);
  }
}

void no_results(Fiber*, uint32_t, const Site*) {}

void retire_group(Fiber* f, uint32_t k) {
  Worker& w = *f->w;
  auto& ops = async_of(f).wgmma;
  for (const WgmmaInFlight& op : ops) {
    if (op.group != k) continue;
    std::memcpy(reinterpret_cast<void*>(op.d.lo), op.result, op.d.bytes);
    lend(f, op.d);
    lend(f, op.a);
  }
  ops.erase(std::remove_if(ops.begin(), ops.end(), [k](const WgmmaInFlight& op) { return op.group == k; }), ops.end());
  // The wgmma reads of group k are over, for this thread and whoever it releases to.
  const uint16_t wgmma_warp = w.clocks.wgmma_warp();
  learn(w.clocks.known(f->tid), wgmma_warp, f->tid / 128, 2 * k + 2);
  learn(w.clocks.async_known(f->tid), wgmma_warp, f->tid / 128, 2 * k + 2);
}

}  // namespace

void check_wgmma_desc(Fiber* f, uint32_t addr, uint32_t lbo, uint32_t sbo, int swizzle, const Site* site) {
  if (swizzle < kSwizzleNone || swizzle > kSwizzle32B) {
    fail_at(f, site, fmt("wgmma_desc: swizzle mode %d (kSwizzleNone, kSwizzle128B, kSwizzle64B, kSwizzle32B)",
                         swizzle));
  }
  if (addr % 16 || lbo % 16 || sbo % 16) {
    fail_at(f, site, fmt("wgmma_desc: start address %u, leading byte offset %u and stride byte offset %u must be "
                         "multiples of 16 (the descriptor drops their 4 low bits)", addr, lbo, sbo));
  }
  if (addr >= kWindowBytes) fail_at(f, site, fmt("wgmma_desc: %u is not a shared address", addr));
  if (lbo > wgmma_desc_field::kAddressMask || sbo > wgmma_desc_field::kAddressMask) {
    fail_at(f, site, fmt("wgmma_desc: leading byte offset %u or stride byte offset %u exceeds the descriptor's 18 bits",
                         lbo, sbo));
  }
}

void wgmma_issue(Fiber* f, const WgmmaCall& call, const Site* site) {
  Worker& w = *f->w;
  async_begin(w);
  if (!async_of(f).fenced) {
    fail_at(f, site, "wgmma.mma_async without a wgmma_fence() since the kernel started or since this thread last "
                     "accessed registers it lent to a wgmma (PTX: wgmma.fence before the first wgmma.mma_async and "
                     "between a register access and a wgmma.mma_async that uses the register)");
  }
  const RegRange d{reinterpret_cast<uintptr_t>(call.d), 2 * call.n};
  const RegRange a = call.a ? RegRange{reinterpret_cast<uintptr_t>(call.a), 16} : RegRange{};
  if (!on_own_stack(f, d.lo) || (a.bytes && !on_own_stack(f, a.lo))) {
    fail_at(f, site, "wgmma.mma_async: the accumulator and the A fragment are registers: local arrays of the thread");
  }
  for (const WgmmaInFlight& op : async_of(f).wgmma) {
    const bool chain = op.d.lo == d.lo && op.n == call.n;
    if ((op.d.overlaps(d.lo, d.bytes) && !chain) || op.a.overlaps(d.lo, d.bytes) ||
        (a.bytes && op.d.overlaps(a.lo, a.bytes))) {
      fail_at(f, site, fmt("wgmma.mma_async: its registers overlap those of a wgmma.mma_async still in flight (issued "
                           "at %s); only wgmmas of one shape may accumulate into the same registers in flight",
                           where(op.site).c_str()));
    }
  }
  f->in.wgmma = &call;
  warpgroup_collective(f, kGroupWgmma, site, "wgmma.mma_async", &wgmma_results);
  forward_lent_registers(f);
}

void wgmma_fence(Fiber* f) {
  async_begin(*f->w);
  async_of(f).fenced = true;
}

void wgmma_commit(Fiber* f) {
  async_begin(*f->w);
  ++async_of(f).committed;
}

void wgmma_wait(Fiber* f, uint32_t pending_allowed) {
  async_begin(*f->w);
  AsyncThread& s = async_of(f);
  while (s.committed - s.retired > pending_allowed) retire_group(f, s.retired++);
  forward_lent_registers(f);
}

bool lent_register_access(Fiber* f, uintptr_t addr, uint32_t n, bool write, const void* code) {
  const Worker& w = *f->w;
  if ((addr >= w.window_lo() && addr < w.window_hi()) || addr - Arena::instance().lo() < Arena::instance().span()) {
    return false;
  }
  for (const WgmmaInFlight& op : async_of(f).wgmma) {
    const bool acc = op.d.overlaps(addr, n);
    if (acc || op.a.overlaps(addr, n)) {
      fail_code(f, code, fmt("this thread %s %s of a wgmma.mma_async still in flight (issued at %s): its registers "
                             "belong to the wgmma until a wgmma_wait_group retires it",
                             write ? "writes" : "reads", acc ? "the accumulator" : "the A fragment registers",
                             where(op.site).c_str()));
    }
  }
  for (const RegRange& r : async_of(f).lent) {
    if (r.overlaps(addr, n)) async_of(f).fenced = false;
  }
  return true;  // (or another local of the thread inside the widened range)
}

void wgmma_thread_exit(Fiber* f) {
  if (async_of(f).wgmma.empty()) return;
  fail(f, fmt("thread exited with %zu wgmma.mma_async operation(s) in flight (the first issued at %s): a "
              "wgmma_wait_group must retire them",
              async_of(f).wgmma.size(), where(async_of(f).wgmma.front().site).c_str()));
}

void setmaxnreg(Fiber* f, const Site* site) {
  async_begin(*f->w);
  warpgroup_collective(f, kGroupSetmaxnreg, site, "setmaxnreg", &no_results);
}

}  // namespace qt::emu::exec
