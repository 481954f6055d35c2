#include "device/emu/executor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "device/emu/block_scheduler.h"
#include "device/emu/bug_reports.h"
#include "device/emu/device_api.h"
#include "device/emu/executor_state.h"
#include "device/emu/profile.h"

namespace qt::emu {

namespace exec {

// The shared window lies between two inaccessible guard bands (see FiberCtx::smem_lo).
Worker::Worker(uint32_t max_threads) : stacks(max_threads), fibers(max_threads) {
  void* m = ::mmap(nullptr, kWindowBytes + 2 * kSmemGuardBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) throw qt::Error("emu: cannot map shared memory window", kExitFailure);
  mapping = m;
  window = static_cast<uint8_t*>(m) + kSmemGuardBytes;
  if (::mprotect(window, kWindowBytes, PROT_READ | PROT_WRITE) != 0) {
    ::munmap(mapping, kWindowBytes + 2 * kSmemGuardBytes);
    throw qt::Error("emu: cannot map a shared memory window (" + std::string(std::strerror(errno)) +
                        "): the process has run out of memory maps (vm.max_map_count); run fewer emulator threads",
                    kExitFailure);
  }
  void* sh = ::mmap(nullptr, size_t{kWindowBytes} * sizeof(Cell), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (sh == MAP_FAILED) throw qt::Error("emu: cannot map the shared-memory race shadow", kExitFailure);
  shadow = static_cast<Cell*>(sh);
  pending.assign(kWindowBytes, 0);
  for (uint32_t i = 0; i < max_threads; ++i) {
    fibers[i].ctx = stacks.ctx(i);
    fibers[i].w = this;
    fibers[i].stack = stacks.extent(i);
    fibers[i].tid = i;
    fibers[i].lane = i % 32;
    fibers[i].warp = i / 32;
  }
}

Worker::~Worker() {
  ::munmap(mapping, kWindowBytes + 2 * kSmemGuardBytes);
  ::munmap(shadow, size_t{kWindowBytes} * sizeof(Cell));
  profile_worker_free(*this);
}

namespace {

// One host thread's share of a launch: blocks (or clusters) taken in turn from the shared counter until none is left or
// a bug was found in any block.
void run_blocks(Launch& L, Worker& w) {
  w.L = &L;
  w.sched_stack = thread_stack();
  w.alloc_hint = 0;
  for (auto& m : w.site_memo) m.loc = 0;  // the ids index this launch's site table
  try {
    const CrashScope crash_scope(w);
    while (!L.failed.load(std::memory_order_relaxed)) {
      const uint64_t b = L.next_block.fetch_add(1);
      if (b >= L.nblocks) break;
      if (L.req->cfg.cluster.count() > 1) run_cluster(w, b);
      else run_block(w, b);
    }
    profile_worker_done(w);
    for (auto& sibling : w.siblings)  // a cluster's other CTAs, observed on their own Workers
      if (sibling->L == &L) profile_worker_done(*sibling);
  } catch (const std::exception& e) {
    record_error(L, host_failure(L, e));  // a block-running thread must not end in std::terminate
  }
  w.page_cache.owner = nullptr;
  w.L = nullptr;
  for (auto& sibling : w.siblings) {
    sibling->page_cache.owner = nullptr;
    sibling->L = nullptr;
  }
}

}  // namespace
}  // namespace exec

struct Executor::Impl {
  std::vector<std::unique_ptr<exec::Worker>> workers;
  std::mutex run_mu;
  uint64_t switches = 0, threads_run = 0, blocks_run = 0;
  std::vector<KernelProfile> profiles;  // by kernel, in first-launch order
};

Executor::Executor(ExecOptions opts) : opts_(opts), impl_(std::make_unique<Impl>()) {
  if (opts_.threads == 0) {
    opts_.threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  }
}

Executor::~Executor() = default;

const Api* Executor::api() const { return exec::api_table(); }

ExecStats Executor::stats() const {
  std::lock_guard<std::mutex> lock(impl_->run_mu);
  return ExecStats{impl_->switches, impl_->threads_run, impl_->blocks_run};
}

void Executor::run(const LaunchRequest& req) {
  dev::validate_launch(req.cfg, req.kernel_name);
  std::lock_guard<std::mutex> lock(impl_->run_mu);
  exec::Launch L;
  L.req = &req;
  L.opts = &opts_;
  L.allocs = Arena::instance().snapshot();
  if (opts_.memory_bytes) {
    const uint64_t live = Arena::instance().live_bytes();
    L.global.limit(opts_.memory_bytes > live ? opts_.memory_bytes - live : 1);
  }
  L.nblocks = req.cfg.grid.count() / req.cfg.cluster.count();  // a cluster's CTAs run together, on one Worker
  exec::Profile profile;
  if (opts_.profile) L.profile = &profile;
  const uint32_t nw = static_cast<uint32_t>(std::min<uint64_t>(opts_.threads, L.nblocks));
  while (impl_->workers.size() < nw) impl_->workers.push_back(std::make_unique<exec::Worker>());
  exec::install_crash_handler();
  if (nw == 1) {
    exec::run_blocks(L, *impl_->workers[0]);
  } else {
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < nw; ++i) {
      threads.emplace_back([&L, w = impl_->workers[i].get()] { exec::run_blocks(L, *w); });
    }
    for (auto& t : threads) t.join();
  }
  impl_->switches = impl_->threads_run = impl_->blocks_run = 0;
  for (const auto& w : impl_->workers) {
    impl_->switches += w->switches;
    impl_->threads_run += w->threads_run;
    impl_->blocks_run += w->blocks_run;
  }
  if (L.failed.load()) throw qt::Error(L.error, kExitFailure);
  if (L.profile) {
    profile.result.kernel = req.kernel_name;
    profile.result.launches = 1;
    auto it = std::find_if(impl_->profiles.begin(), impl_->profiles.end(),
                           [&](const KernelProfile& k) { return k.kernel == req.kernel_name; });
    if (it == impl_->profiles.end()) impl_->profiles.push_back(profile.result);
    else it->merge(profile.result);
  }
}

std::vector<KernelProfile> Executor::profiles() const {
  std::lock_guard<std::mutex> lock(impl_->run_mu);
  return impl_->profiles;
}

void Executor::clear_profiles() {
  std::lock_guard<std::mutex> lock(impl_->run_mu);
  impl_->profiles.clear();
}

}  // namespace qt::emu
