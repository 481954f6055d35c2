#pragma once
// Thread block clusters (sm_90): the cluster's geometry, its barrier (barrier.cluster.arrive.release and
// wait.acquire, always as one cluster_sync), and reads of another CTA's shared memory through a mapa address
// (ld.shared::cluster). A cluster's CTAs run together on one host thread (block_scheduler.h, run_cluster).
//
// What is checked, each a report with the line:
//   - a read of another CTA's shared memory that no barrier.cluster orders after the owner's write, or an owner's
//     write that none orders after such a read (race_shadow.h: the accesses carry the cluster's generation);
//   - a CTA that exits while another still reads its shared memory (a barrier.cluster before the exit missing),
//     and a read of the shared memory of a CTA that has exited;
//   - threads that reach barrier.cluster at different call sites (it waits for every thread that has not
//     exited, as on a GPU, so an exit is no bug; threads that never arrive end in the deadlock report);
//   - a rank outside the cluster, and reads outside the owner's shared memory or misaligned.
// A launch without clusters is a cluster of one CTA: its barrier.cluster is the block's barrier.
#include <cstdint>

#include "device/emu/executor_state.h"

namespace qt::emu::exec {

// %cluster_ctarank (which = 0) or %cluster_nctarank (which = 1) of `f`'s CTA.
uint32_t cluster_query(Fiber* f, uint32_t which);
// barrier.cluster.arrive.release + barrier.cluster.wait.acquire by `f`.
void cluster_sync(Fiber* f, const Site* site);
// mapa.shared::cluster: the address of shared address `addr` of `f`'s CTA in the CTA of rank `rank`.
uint32_t cluster_map(Fiber* f, uint32_t addr, uint32_t rank, const Site* site);
// ld.shared::cluster of `bytes` (4, 8 or 16) at `addr` (a mapa address, or `f`'s own shared address) into `out`.
void cluster_load(Fiber* f, uint32_t addr, uint32_t bytes, void* out, const Site* site);
// Thread `f` of a cluster returns: a barrier.cluster still waits only for the threads that have not.
void cluster_thread_exit(Fiber* f);
// Every thread of the CTA `w` runs has returned: reads of its shared memory by other CTAs must all be ordered
// before its exit.
void cluster_cta_exit(Worker& w);

}  // namespace qt::emu::exec
