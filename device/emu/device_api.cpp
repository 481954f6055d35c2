#include "device/emu/device_api.h"

#include <atomic>
#include <cstring>
#include <type_traits>

#include "device/emu/async_ops.h"
#include "device/emu/block_scheduler.h"
#include "device/emu/bug_reports.h"
#include "device/emu/cluster.h"
#include "device/emu/executor_state.h"
#include "device/emu/memory_checks.h"
#include "device/emu/profile.h"
#include "device/emu/wgmma.h"
#include "kernels_src/common/emu_ops.h"

namespace qt::emu::exec {
namespace {

// Rendezvous::op: the collective in the high nibble, its variant (shuffle mode, vote kind, ldmatrix count
// and .trans, mma type) in the low one.
enum Op : uint32_t { kOpShfl = 0x10, kOpVote = 0x20, kOpSyncwarp = 0x30, kOpLdmatrix = 0x40, kOpMma = 0x50 };

void api_access(FiberCtx* c, const void* p, uint32_t bytes, uint32_t flags, const void* code) {
  Fiber* f = fiber_of(c);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (f->w->async.used && lent_register_access(f, a, bytes, flags & kAccessWrite, code)) return;
  check_access(f, a, bytes, flags, code, nullptr, "this thread");
}

int api_barrier(FiberCtx* c, BarrierKind kind, int pred, const Site* site) {
  return block_barrier(fiber_of(c), kind, pred, site);
}

uint16_t h16(uint32_t reg, int half) { return static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffff); }

// mma.m16n8k32 s8 x s8 + s32: exact integer products, the sum wrapped to 32 bits (no .satfinite). The
// lanes' C and D slots hold int32 bits.
void mma_s8_results(Warp& wp) {
  auto s8 = [](uint32_t reg, int byte) { return static_cast<int64_t>(static_cast<int8_t>(reg >> (8 * byte))); };
  int64_t A[16][32], B[32][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    const Fiber* fl = wp.lanes[l];
    int32_t c[4];
    std::memcpy(c, fl->in.mma.c, sizeof(c));
    for (int i = 0; i < 16; ++i) A[mma_s8_a_row(l, i)][mma_s8_a_col(l, i)] = s8(fl->in.mma.a[i / 4], i % 4);
    for (int i = 0; i < 8; ++i) B[mma_s8_b_row(l, i)][mma_s8_b_col(l, i)] = s8(fl->in.mma.b[i / 4], i % 4);
    for (int i = 0; i < 4; ++i) C[mma_c_row(l, i)][mma_c_col(l, i)] = c[i];
  }
  for (int l = 0; l < 32; ++l) {
    int32_t d[4];
    for (int i = 0; i < 4; ++i) {
      const int row = mma_c_row(l, i), col = mma_c_col(l, i);
      int64_t acc = C[row][col];
      for (int k = 0; k < 32; ++k) acc += A[row][k] * B[k][col];
      d[i] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc)));
    }
    std::memcpy(wp.lanes[l]->out.d, d, sizeof(d));
  }
}

// The results of a completed warp collective, computed by its last lane `f` for all lanes of `r.mask`.
void collective_results(Fiber* f, Warp& wp, const Rendezvous& r) {
  Worker& w = *f->w;
  const uint32_t kind = r.op & 0xf0u, sub = r.op & 0x0fu;
  switch (kind) {
    case kOpShfl: {
      for (uint32_t m = r.mask; m; m &= m - 1) {
        const uint32_t l = __builtin_ctz(m);
        Fiber* fl = wp.lanes[l];
        const int j = shfl_source_lane(static_cast<int>(sub), l, fl->in.shfl.b, fl->in.shfl.c);
        if (j < 0) {
          fl->out.v = fl->in.shfl.value;
        } else if (!(r.mask & (1u << j))) {
          fail_at(f, &r.site, fmt("__shfl_sync: lane %u reads lane %d, which is not in the member mask 0x%08x "
                                  "(undefined on the GPU)", l, j, r.mask));
        } else {
          fl->out.v = wp.lanes[j]->in.shfl.value;
        }
      }
      break;
    }
    case kOpVote: {
      uint32_t ballot = 0;
      for (uint32_t m = r.mask; m; m &= m - 1) {
        const uint32_t l = __builtin_ctz(m);
        if (wp.lanes[l]->in.pred) ballot |= 1u << l;
      }
      const uint32_t v = sub == 0 ? ballot : (sub == 1 ? (ballot != 0) : (ballot == r.mask));
      for (uint32_t m = r.mask; m; m &= m - 1) wp.lanes[__builtin_ctz(m)]->out.v = v;
      break;
    }
    case kOpSyncwarp: {
      record_warp_sync(w, f->warp, r.mask);
      break;
    }
    case kOpLdmatrix: {
      const uint32_t num = sub & 7u;
      const bool trans = sub & 8u;
      uint16_t mat[4][8][8];
      uint32_t rows[32];
      for (uint32_t m = 0; m < num; ++m) {
        for (uint32_t row = 0; row < 8; ++row) {
          Fiber* src = wp.lanes[8 * m + row];
          const uint32_t addr = src->in.addr;
          rows[8 * m + row] = addr;
          if (addr % 16 != 0) {
            fail_at(src, &r.site, fmt("ldmatrix: row address %u (shared) given by lane %u is not 16-byte aligned", addr, 8 * m + row));
          }
          if (!smem_valid(w, addr, 16)) {
            fail_at(src, &r.site, fmt("ldmatrix: row address given by lane %u is out of bounds: %s", 8 * m + row,
                                      smem_region(w, addr).c_str()));
          }
          if (w.L->opts->race_checks) shadow_access(src, addr, 16, false, false, nullptr, &r.site, "ldmatrix row of this thread");
          std::memcpy(mat[m][row], w.window + addr, 16);
        }
      }
      if (w.L->profile) profile_ldmatrix(w, r, rows, num);
      for (uint32_t l = 0; l < 32; ++l) {
        for (uint32_t m = 0; m < num; ++m) {
          const uint16_t lo = mat[m][ldmatrix_row(l, 0, trans)][ldmatrix_col(l, 0, trans)];
          const uint16_t hi = mat[m][ldmatrix_row(l, 1, trans)][ldmatrix_col(l, 1, trans)];
          wp.lanes[l]->out.r[m] = pack16(lo, hi);
        }
      }
      break;
    }
    case kOpMma: {
      if (sub == static_cast<uint32_t>(MmaKind::kS8S32)) {
        mma_s8_results(wp);
        break;
      }
      const bool bf = sub == 1;
      auto val = [bf](uint16_t h) { return static_cast<double>(bf ? bf16_bits_to_float(h) : half_bits_to_float(h)); };
      double A[16][16], B[16][8], C[16][8];
      for (int l = 0; l < 32; ++l) {
        const Fiber* fl = wp.lanes[l];
        for (int i = 0; i < 8; ++i) A[mma_a_row(l, i)][mma_a_col(l, i)] = val(h16(fl->in.mma.a[i / 2], i % 2));
        for (int i = 0; i < 4; ++i) B[mma_b_row(l, i)][mma_b_col(l, i)] = val(h16(fl->in.mma.b[i / 2], i % 2));
        for (int i = 0; i < 4; ++i) C[mma_c_row(l, i)][mma_c_col(l, i)] = fl->in.mma.c[i];
      }
      for (int l = 0; l < 32; ++l) {
        for (int i = 0; i < 4; ++i) {
          const int row = mma_c_row(l, i), col = mma_c_col(l, i);
          double acc = 0.0;
          for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
          wp.lanes[l]->out.d[i] = static_cast<float>(acc + C[row][col]);
        }
      }
      break;
    }
    default: break;
  }
}

void collective(Fiber* f, uint32_t op, uint32_t mask, const Site* site, bool aligned, const char* what) {
  warp_collective(f, op, mask, site, aligned, what, &collective_results);
}

void api_syncwarp(FiberCtx* c, uint32_t mask, const Site* site) {
  collective(fiber_of(c), kOpSyncwarp, mask, site, false, "__syncwarp");
}

uint64_t api_shfl(FiberCtx* c, ShflMode mode, uint32_t mask, uint64_t value, uint32_t b, uint32_t cc, uint32_t /*bytes*/,
                  const Site* site) {
  Fiber* f = fiber_of(c);
  f->in.shfl.value = value;
  f->in.shfl.b = b;
  f->in.shfl.c = cc;
  collective(f, kOpShfl | static_cast<uint32_t>(mode), mask, site, false, "__shfl_sync");
  return f->out.v;
}

uint32_t api_vote(FiberCtx* c, VoteKind kind, uint32_t mask, int pred, const Site* site) {
  Fiber* f = fiber_of(c);
  f->in.pred = pred;
  static const char* names[] = {"__ballot_sync", "__any_sync", "__all_sync"};
  collective(f, kOpVote | static_cast<uint32_t>(kind), mask, site, false, names[static_cast<int>(kind)]);
  return static_cast<uint32_t>(f->out.v);
}

void api_ldmatrix(FiberCtx* c, uint32_t num, bool trans, uint32_t smem_addr, uint32_t* out, const Site* site) {
  Fiber* f = fiber_of(c);
  f->in.addr = smem_addr;
  collective(f, kOpLdmatrix | num | (trans ? 8u : 0u), 0xffffffffu, site, true, trans ? "ldmatrix.trans" : "ldmatrix");
  for (uint32_t m = 0; m < num; ++m) out[m] = f->out.r[m];
}

void api_mma(FiberCtx* c, MmaKind kind, float* d, const uint32_t* a, const uint32_t* b, const float* cin, const Site* site) {
  Fiber* f = fiber_of(c);
  std::memcpy(f->in.mma.a, a, 16);
  std::memcpy(f->in.mma.b, b, 8);
  std::memcpy(f->in.mma.c, cin, 16);
  collective(f, kOpMma | static_cast<uint32_t>(kind), 0xffffffffu, site, true,
             kind == MmaKind::kS8S32 ? "mma.sync.m16n8k32" : "mma.sync.m16n8k16");
  std::memcpy(d, f->out.d, 16);
}

// The data of a cp.async lands; the part past src-size is zero-filled, as cp.async's src-size operand
// specifies.
void complete_copy(Worker& w, Fiber* f, const CpCopy& cp) {
  uint8_t* dst = w.window + cp.dst_off;
  if (cp.src_size) std::memcpy(dst, cp.src, cp.src_size);
  if (cp.src_size < cp.cp_size) std::memset(dst + cp.src_size, 0, cp.cp_size - cp.src_size);
  record_async_write(f, cp.dst_off, cp.cp_size);
}

void api_cp_async(FiberCtx* c, uint32_t smem_addr, const void* src, uint32_t cp_size, uint32_t src_size, const Site* site) {
  Fiber* f = fiber_of(c);
  Worker& w = *f->w;
  if (src_size > cp_size) fail_at(f, site, fmt("cp.async: src-size %u exceeds cp-size %u", src_size, cp_size));
  if (smem_addr % cp_size != 0) {
    fail_at(f, site, fmt("cp.async: shared destination %u is not %u-byte aligned", smem_addr, cp_size));
  }
  const uintptr_t s = reinterpret_cast<uintptr_t>(src);
  if (s % cp_size != 0) fail_at(f, site, fmt("cp.async: global source %s is not %u-byte aligned", hex(s).c_str(), cp_size));
  if (!smem_valid(w, smem_addr, cp_size)) {
    fail_at(f, site, fmt("cp.async: out-of-bounds shared destination of %u bytes at %s", cp_size, smem_region(w, smem_addr).c_str()));
  }
  if (src_size > 0 && !global_valid(w, s, src_size)) {
    fail_at(f, site, fmt("cp.async: out-of-bounds global source of %u bytes at %s: %s", src_size, hex(s).c_str(),
                         Arena::instance().describe(s).c_str()));
  }
  if (w.L->opts->race_checks) {
    shadow_access(f, smem_addr, cp_size, true, false, nullptr, site, "cp.async of this thread");
    if (src_size > 0) global_shadow_access(f, s, src_size, false, false, nullptr, site, "cp.async of this thread");
  }
  if (w.L->profile) profile_cp_async(f, smem_addr, s, cp_size, src_size, site);
  // Until it is waited for the destination holds garbage, as on the GPU.
  std::memset(w.window + smem_addr, 0xFF, cp_size);
  mark_async_pending(f, smem_addr, cp_size);
  f->uncommitted.push_back(CpCopy{smem_addr, static_cast<const uint8_t*>(src), cp_size, src_size});
}

void api_cp_async_commit(FiberCtx* c) {
  Fiber* f = fiber_of(c);
  f->groups.push_back(std::move(f->uncommitted));
  f->uncommitted.clear();
}

void api_cp_async_wait(FiberCtx* c, uint32_t allowed, const Site*) {
  Fiber* f = fiber_of(c);
  if (f->w->L->profile) {
    uint64_t bytes = 0;
    for (const auto& g : f->groups)
      for (const CpCopy& cp : g) bytes += cp.src_size;
    profile_cp_wait(f, static_cast<uint32_t>(f->groups.size()), bytes);
  }
  while (f->groups.size() > allowed) {
    for (const CpCopy& cp : f->groups.front()) complete_copy(*f->w, f, cp);
    f->groups.pop_front();
  }
}

template <class T>
T apply_op(AtomicOp op, T old, T v) {
  switch (op) {
    case AtomicOp::kAdd: return static_cast<T>(old + v);
    case AtomicOp::kSub: return static_cast<T>(old - v);
    case AtomicOp::kMin: return v < old ? v : old;
    case AtomicOp::kMax: return v > old ? v : old;
    case AtomicOp::kExch: return v;
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case AtomicOp::kAnd: return old & v;
      case AtomicOp::kOr: return old | v;
      case AtomicOp::kXor: return old ^ v;
      default: break;
    }
  }
  return v;
}

// Blocks run on several host threads at once, so global atomics must be atomic on the host too.
template <class T, class Bits>
uint64_t atomic_rmw(AtomicOp op, void* p, uint64_t vbits, uint64_t cbits) {
  Bits* bp = static_cast<Bits*>(p);
  Bits v, cmp;
  std::memcpy(&v, &vbits, sizeof(Bits));
  std::memcpy(&cmp, &cbits, sizeof(Bits));
  Bits old = __atomic_load_n(bp, __ATOMIC_SEQ_CST);
  while (true) {
    Bits desired;
    if (op == AtomicOp::kCas) {
      if (old != cmp) break;
      desired = v;
    } else {
      T ot, vt;
      std::memcpy(&ot, &old, sizeof(T));
      std::memcpy(&vt, &v, sizeof(T));
      const T nt = apply_op<T>(op, ot, vt);
      std::memcpy(&desired, &nt, sizeof(T));
    }
    if (__atomic_compare_exchange_n(bp, &old, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break;
  }
  uint64_t r = 0;
  std::memcpy(&r, &old, sizeof(Bits));
  return r;
}

uint64_t api_atomic(FiberCtx* c, AtomicOp op, AtomicType type, void* p, uint64_t v, uint64_t cmp, const Site* site) {
  Fiber* f = fiber_of(c);
  const uint32_t bytes = (type == AtomicType::kU64 || type == AtomicType::kF64) ? 8 : 4;
  check_access(f, reinterpret_cast<uintptr_t>(p), bytes, kAccessAligned | kAccessAtomic, nullptr, site, "this thread's atomic");
  f->atomic_time = f->w->L->global.tick();
  const bool fp = type == AtomicType::kF32 || type == AtomicType::kF64;
  if (fp && op != AtomicOp::kAdd && op != AtomicOp::kExch && op != AtomicOp::kCas) {
    fail_at(f, site, "atomic min/max/and/or/xor on a floating-point value does not exist in CUDA");
  }
  switch (type) {
    case AtomicType::kI32: return atomic_rmw<int32_t, uint32_t>(op, p, v, cmp);
    case AtomicType::kU32: return atomic_rmw<uint32_t, uint32_t>(op, p, v, cmp);
    case AtomicType::kU64: return atomic_rmw<uint64_t, uint64_t>(op, p, v, cmp);
    case AtomicType::kF32: return atomic_rmw<float, uint32_t>(op, p, v, cmp);
    case AtomicType::kF64: return atomic_rmw<double, uint64_t>(op, p, v, cmp);
  }
  return 0;
}

// QT_SHARED: a static __shared__ variable, identified by `tag`; the first thread to reach it places it and
// every other thread of the block gets the same address.
void* api_static_shared(FiberCtx* c, const void* tag, uint32_t bytes, uint32_t align, const Site* site) {
  Fiber* f = fiber_of(c);
  Worker& w = *f->w;
  for (const auto& [t, off] : w.static_map) {
    if (t == tag) return w.window + off;
  }
  if (align == 0 || (align & (align - 1)) != 0) fail_at(f, site, fmt("QT_SHARED: alignment %u is not a power of two", align));
  const uint32_t off = (w.static_used + align - 1) & ~(align - 1);
  if (uint64_t{off} + bytes > kStaticSmemBytes) {
    fail_at(f, site, fmt("static shared memory exceeds 48 KiB: %u bytes in use, %u more requested", off, bytes));
  }
  // A GPU launch fails when static plus dynamic shared memory exceed the per-block limit (227 KiB on sm_90,
  // less on older parts), even though each part alone is allowed.
  if (uint64_t{off} + bytes + w.dyn_bytes > kMaxDynamicSmemBytes) {
    fail_at(f, site, fmt("static shared memory (%u bytes after this request) plus the launch's %u bytes of dynamic "
                         "shared memory exceed 227 KiB per block", off + bytes, w.dyn_bytes));
  }
  w.static_used = off + bytes;
  w.static_map.emplace_back(tag, off);
  return w.window + off;
}

void* api_dynamic_shared(FiberCtx* c) { return fiber_of(c)->w->window + kStaticSmemBytes; }

uint32_t api_cvta_shared(FiberCtx* c, const void* p, const Site* site) {
  Fiber* f = fiber_of(c);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), win = reinterpret_cast<uintptr_t>(f->w->window);
  if (a < win || a > win + kWindowBytes) {
    fail_at(f, site, "__cvta_generic_to_shared / smem_u32 of " + hex(a) + ", which is not a shared-memory address");
  }
  return static_cast<uint32_t>(a - win);
}

void api_fence(FiberCtx* c) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  record_fence(fiber_of(c));
}

void api_trap(FiberCtx* c, const char* message, const Site* site) {
  fail_at(fiber_of(c), site, std::string("trap: ") + (message ? message : ""));
}

// ---- sm_90: wgmma.cpp and async_ops.cpp -----------------------------------------------------------------
void api_check_wgmma_desc(FiberCtx* c, uint32_t addr, uint32_t lbo, uint32_t sbo, int swizzle, const Site* site) {
  check_wgmma_desc(fiber_of(c), addr, lbo, sbo, swizzle, site);
}
void api_wgmma(FiberCtx* c, const WgmmaCall* call, const Site* site) { wgmma_issue(fiber_of(c), *call, site); }
void api_wgmma_fence(FiberCtx* c, const Site*) { wgmma_fence(fiber_of(c)); }
void api_wgmma_commit(FiberCtx* c, const Site*) { wgmma_commit(fiber_of(c)); }
void api_wgmma_wait(FiberCtx* c, uint32_t pending_allowed, const Site*) { wgmma_wait(fiber_of(c), pending_allowed); }
void api_fence_proxy_async(FiberCtx* c, const Site*) { fence_proxy_async(fiber_of(c)); }
void api_fence_mbarrier_init(FiberCtx* c, const Site*) { fence_mbarrier_init(fiber_of(c)); }
void api_named_barrier(FiberCtx* c, uint32_t id, uint32_t threads, bool wait, const Site* site) {
  named_barrier(fiber_of(c), id, threads, wait, site);
}
void api_setmaxnreg(FiberCtx* c, const Site* site) { setmaxnreg(fiber_of(c), site); }
void api_mbarrier_init(FiberCtx* c, uint32_t mbar, uint32_t count, const Site* site) {
  mbarrier_init(fiber_of(c), mbar, count, site);
}
void api_mbarrier_arrive(FiberCtx* c, uint32_t mbar, uint32_t tx_bytes, const Site* site) {
  mbarrier_arrive(fiber_of(c), mbar, tx_bytes, site);
}
bool api_mbarrier_try_wait(FiberCtx* c, uint32_t mbar, uint32_t parity, const Site* site) {
  mbarrier_wait(fiber_of(c), mbar, parity, site);
  return true;
}
void api_bulk_copy_g2s(FiberCtx* c, uint32_t dst, const void* src, uint32_t bytes, uint32_t mbar, const Site* site) {
  bulk_copy_g2s(fiber_of(c), dst, src, bytes, mbar, site);
}

// ---- sm_90 thread block clusters: cluster.cpp ---------------------------------------------------------
uint32_t api_cluster_query(FiberCtx* c, uint32_t which) { return cluster_query(fiber_of(c), which); }
void api_cluster_sync(FiberCtx* c, const Site* site) { cluster_sync(fiber_of(c), site); }
uint32_t api_cluster_map(FiberCtx* c, uint32_t addr, uint32_t rank, const Site* site) {
  return cluster_map(fiber_of(c), addr, rank, site);
}
void api_cluster_load(FiberCtx* c, uint32_t addr, uint32_t bytes, void* out, const Site* site) {
  cluster_load(fiber_of(c), addr, bytes, out, site);
}

}  // namespace

const Api* api_table() {
  static const Api api = [] {
    Api a{};
    a.abi_version = kAbiVersion;
    a.arena_lo = Arena::instance().lo();
    a.arena_span = Arena::instance().span();
    a.access = &api_access;
    a.barrier = &api_barrier;
    a.syncwarp = &api_syncwarp;
    a.shfl = &api_shfl;
    a.vote = &api_vote;
    a.ldmatrix = &api_ldmatrix;
    a.mma = &api_mma;
    a.cp_async = &api_cp_async;
    a.cp_async_commit = &api_cp_async_commit;
    a.cp_async_wait = &api_cp_async_wait;
    a.atomic = &api_atomic;
    a.static_shared = &api_static_shared;
    a.dynamic_shared = &api_dynamic_shared;
    a.cvta_shared = &api_cvta_shared;
    a.trap = &api_trap;
    a.fence = &api_fence;
    a.check_wgmma_desc = &api_check_wgmma_desc;
    a.wgmma = &api_wgmma;
    a.wgmma_fence = &api_wgmma_fence;
    a.wgmma_commit = &api_wgmma_commit;
    a.wgmma_wait = &api_wgmma_wait;
    a.fence_proxy_async = &api_fence_proxy_async;
    a.fence_mbarrier_init = &api_fence_mbarrier_init;
    a.named_barrier = &api_named_barrier;
    a.setmaxnreg = &api_setmaxnreg;
    a.mbarrier_init = &api_mbarrier_init;
    a.mbarrier_arrive = &api_mbarrier_arrive;
    a.mbarrier_try_wait = &api_mbarrier_try_wait;
    a.bulk_copy_g2s = &api_bulk_copy_g2s;
    a.cluster_query = &api_cluster_query;
    a.cluster_sync = &api_cluster_sync;
    a.cluster_map = &api_cluster_map;
    a.cluster_load = &api_cluster_load;
    return a;
  }();
  return &api;
}

}  // namespace qt::emu::exec
