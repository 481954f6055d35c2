#include "device/emu/cluster.h"

#include <algorithm>
#include <cstring>

#include "device/emu/block_clocks.h"
#include "device/emu/block_scheduler.h"
#include "device/emu/bug_reports.h"
#include "device/emu/memory_checks.h"
#include "device/emu/profile.h"

namespace qt::emu::exec {
namespace {

// A mapa address: this tag, the target rank in bits 24..27, and the shared offset in that CTA (under 16 MiB).
constexpr uint32_t kMapaTag = 0x40000000u;
constexpr uint32_t kRankShift = 24;
constexpr uint32_t kOffsetMask = (1u << kRankShift) - 1;
const char kClusterBarrier[] = "barrier.cluster (cluster_sync)";

std::string cta_name(const Worker& w) { return fmt("cluster CTA rank %u (block %s)", w.cta_rank, dim(w.block_idx).c_str()); }

// The barrier.cluster the cluster's remaining threads wait at completes (`f`, its last arrival, goes on without
// waiting; null when the last thread to be waited for exited): it orders each CTA's threads as a __syncthreads
// would, and every CTA's shared accesses before it before every access after it (the new generation).
void complete_barrier(Worker& w, Fiber* f) {
  ClusterRun* c = w.cluster;
  c->arrived = 0;
  ++c->generation;
  for (Worker* m : c->ctas) {
    if (m->uninit.set && m->L->opts->race_checks) {
      record_error(w, uninit_report(*m));
      if (f) throw FiberAbort{};
      return;
    }
    ++m->epoch;
    if (m->clocks.on()) sync_block_clocks(*m);
    if (m->L->profile) profile_flush(*m, false);
    for (uint32_t t = 0; t < m->nthreads; ++t) {
      Fiber& other = m->fibers[t];
      if (other.state == State::kDone) continue;
      other.cluster_passed = c->generation;
      if (&other != f && other.state == State::kAsyncWait && other.wait_what == kClusterBarrier) wake(&other);
    }
  }
}

}  // namespace

uint32_t cluster_query(Fiber* f, uint32_t which) {
  const Worker& w = *f->w;
  if (which == 0) return w.cta_rank;
  return w.cluster ? static_cast<uint32_t>(w.cluster->ctas.size()) : 1;
}

void cluster_sync(Fiber* f, const Site* site) {
  Worker& w = *f->w;
  ClusterRun* c = w.cluster;
  if (!c) {  // a cluster of one: the CTA's own barrier
    block_barrier(f, BarrierKind::kPlain, 0, site);
    return;
  }
  if (c->arrived == 0) {
    c->site = *site;
  } else if (!same_site(c->site, *site)) {
    fail_at(f, site, fmt("divergent barrier.cluster: this thread reached cluster_sync while %u other thread(s) of the "
                         "cluster wait at the one at %s", c->arrived, where(c->site).c_str()));
  }
  if (++c->arrived < c->threads - c->returned) {
    park_async(f, site, kClusterBarrier);
    return;
  }
  complete_barrier(w, f);
}

void cluster_thread_exit(Fiber* f) {
  Worker& w = *f->w;
  ClusterRun* c = w.cluster;
  ++c->returned;
  if (c->arrived > 0 && c->arrived == c->threads - c->returned) complete_barrier(w, nullptr);
}

uint32_t cluster_map(Fiber* f, uint32_t addr, uint32_t rank, const Site* site) {
  const uint32_t size = cluster_query(f, 1);
  if (rank >= size)
    fail_at(f, site, fmt("mapa to CTA rank %u of a cluster of %u CTA(s)", rank, size));
  if (addr & kMapaTag)
    fail_at(f, site, fmt("mapa of %s, which is already a distributed shared-memory address", hex(addr).c_str()));
  if (addr > kOffsetMask) fail_at(f, site, fmt("mapa of %s, which is not a shared-memory address", hex(addr).c_str()));
  return kMapaTag | (rank << kRankShift) | addr;
}

void cluster_load(Fiber* f, uint32_t addr, uint32_t bytes, void* out, const Site* site) {
  Worker& w = *f->w;
  const uint32_t rank = (addr & kMapaTag) ? (addr >> kRankShift) & 0xF : w.cta_rank;
  const uint32_t off = addr & kOffsetMask;
  Worker& owner = w.cluster ? *w.cluster->ctas.at(rank) : w;
  if (off % bytes != 0)
    fail_at(f, site, fmt("misaligned %u-byte ld.shared::cluster at shared offset %u", bytes, off));
  if (w.cluster && w.cluster->exited[rank])
    fail_at(f, site, fmt("ld.shared::cluster reads the shared memory of %s, which has exited: a barrier.cluster "
                         "before its exit is missing", cta_name(owner).c_str()));
  // Every CTA runs the same kernel, so the reader's static shared layout is the owner's too, also where the
  // owner's threads have not yet reached the declarations that place it here.
  if (!smem_valid(owner, off, bytes) && !smem_valid(w, off, bytes))
    fail_at(f, site, fmt("out-of-bounds ld.shared::cluster of %u byte(s) at %s of %s", bytes,
                         smem_region(owner, off).c_str(), cta_name(owner).c_str()));
  if (w.L->opts->race_checks) {
    if (&owner == &w) {
      shadow_access(f, off, bytes, false, false, nullptr, site, "this thread's ld.shared::cluster");
    } else {
      Accessor acc = accessor(f, false, kSharedBlock);
      acc.block = kRemoteBlockTag | w.block_id;
      const ShadowHit hit = shadow_cells(f, owner, off, bytes, false, acc, nullptr, site, "ld.shared::cluster");
      if (hit.conflict != Conflict::kNone)
        fail_at(f, site, fmt("distributed shared-memory race: this thread's ld.shared::cluster reads %u byte(s) at %s "
                             "of %s, which %s wrote with no barrier.cluster (cluster_sync) in between",
                             bytes, smem_region(owner, hit.off).c_str(), cta_name(owner).c_str(),
                             shared_accessor_name(owner, hit.other).c_str()));
    }
  }
  std::memcpy(out, owner.window + off, bytes);
}

void cluster_cta_exit(Worker& w) {
  ClusterRun& c = *w.cluster;
  c.exited[w.cta_rank] = 1;
  if (!w.L->opts->race_checks) return;
  // The threads of a CTA pass the same barriers, so its last thread's generation is the CTA's.
  uint32_t passed = 0;
  for (uint32_t t = 0; t < w.nthreads; ++t) passed = std::max(passed, w.fibers[t].cluster_passed);
  const uint32_t end = kStaticSmemBytes + w.dyn_bytes;
  for (uint32_t off = 0; off < end; ++off) {
    const AccessSet& r = w.shadow[off].r;
    const bool remote = r.block == kManyBlocks || (r.block & kRemoteBlockTag);
    if (r.block == 0 || !remote || r.time < passed) continue;
    record_error(w, "emu: kernel " + w.L->req->kernel_name + ": " + cta_name(w) + " exited while " +
                        shared_accessor_name(w, r) + " may still read its shared memory (" + smem_region(w, off) +
                        ") through ld.shared::cluster: a barrier.cluster (cluster_sync) after those reads and before "
                        "the exit is missing");
    return;
  }
}

}  // namespace qt::emu::exec
