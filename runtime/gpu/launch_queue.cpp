#include "runtime/gpu/launch_queue.h"

#include <cstring>

#include "common/error.h"

namespace qt::rt {

void LaunchQueue::begin_step(bool capturable, int64_t rows) {
  in_step_ = true;
  capturable_ = capturable && graphs_ && !timing_;
  queue_.clear();
  step_queued_ = step_run_ = 0;
  step_rows_ = rows;
  pending_times_.clear();
}

void LaunchQueue::launch(const dev::Kernel& kernel, const dev::LaunchConfig& cfg, dev::KernelArgs args) {
  if (!in_step_) {
    device_.launch(kernel, cfg, args);
    ++stats_.launches;
    return;
  }
  queue_.push_back(Queued{kernel, cfg, std::move(args), {}, {}, {}});
  ++step_queued_;
}

void LaunchQueue::call(std::function<void()> fn, std::string signature, std::string name) {
  if (!in_step_) {
    fn();
    ++stats_.launches;
    return;
  }
  Queued q;
  q.call = std::move(fn);
  q.call_signature = std::move(signature);
  q.call_name = std::move(name);
  queue_.push_back(std::move(q));
  ++step_queued_;
}

void LaunchQueue::run_one(const Queued& q) {
  if (q.call)
    q.call();
  else
    device_.launch(q.kernel, q.cfg, q.args);
}

void LaunchQueue::run_queued() {
  for (const Queued& q : queue_) {
    if (timing_) {
      PendingTime t;
      t.launch.call = static_cast<bool>(q.call);
      t.launch.name = q.call ? q.call_name : q.kernel.module->source().kernels.at(q.kernel.index);
      if (!q.call) t.launch.cfg = q.cfg;
      t.start = device_.record_event();
      run_one(q);
      t.end = device_.record_event();
      pending_times_.push_back(std::move(t));
    } else {
      run_one(q);
    }
    if (observer_) observer_(++step_run_, step_queued_);
  }
  stats_.launches += int64_t(queue_.size());
  queue_.clear();
}

void LaunchQueue::flush() {
  if (!in_step_) return;
  capturable_ = false;
  run_queued();
}

// The module address and kernel index identify the kernel; with the configuration and every argument byte
// (device addresses included) equal, a replay does exactly what running the queue would.
std::string LaunchQueue::signature() const {
  std::string s;
  for (const Queued& q : queue_) {
    if (q.call) {
      s += "call:" + q.call_signature + "|";
      continue;
    }
    const uint64_t id[2] = {reinterpret_cast<uint64_t>(q.kernel.module), uint64_t(q.kernel.index)};
    const uint32_t cfg[10] = {q.cfg.grid.x,  q.cfg.grid.y,  q.cfg.grid.z, q.cfg.block.x,
                              q.cfg.block.y, q.cfg.block.z, q.cfg.dynamic_smem_bytes,
                              q.cfg.cluster.x, q.cfg.cluster.y, q.cfg.cluster.z};
    s.append(reinterpret_cast<const char*>(id), sizeof id);
    s.append(reinterpret_cast<const char*>(cfg), sizeof cfg);
    const std::vector<void*> ptrs = q.args.pointers();
    for (size_t i = 0; i < ptrs.size(); ++i) s.append(static_cast<const char*>(ptrs[i]), q.args.arg_size(i));
    s.push_back('|');
  }
  return s;
}

void LaunchQueue::read_step_times() {
  if (pending_times_.empty()) return;
  TimedStep step;
  step.rows = step_rows_;
  step.seconds = device_.seconds_between(*pending_times_.front().start, *pending_times_.back().end);
  for (PendingTime& t : pending_times_) {
    t.launch.seconds = device_.seconds_between(*t.start, *t.end);
    step.launches.push_back(std::move(t.launch));
  }
  pending_times_.clear();
  if (timed_.size() == kTimedSteps) {
    timed_.erase(timed_.begin() + 1);
    ++timed_dropped_;
  }
  timed_.push_back(std::move(step));
}

void LaunchQueue::drop_graph() {
  if (in_step_) throw Error("LaunchQueue::drop_graph inside a step", kExitFailure);
  graph_.reset();
  graph_signature_.clear();
  last_signature_.clear();
}

void LaunchQueue::end_step() {
  in_step_ = false;
  if (!capturable_ || queue_.empty()) {
    run_queued();
    last_signature_.clear();
    if (timing_) read_step_times();
    return;
  }
  const std::string sig = signature();
  if (graph_ && sig == graph_signature_) {
    graph_->replay();
    ++stats_.replays;
    stats_.replayed_launches += int64_t(queue_.size());
    queue_.clear();
  } else if (sig == last_signature_) {
    // Seen twice in a row: worth a graph.
    device_.begin_capture();
    for (const Queued& q : queue_) run_one(q);
    graph_ = device_.end_capture();
    graph_signature_ = sig;
    ++stats_.captures;
    graph_->replay();
    ++stats_.replays;
    stats_.replayed_launches += int64_t(queue_.size());
    queue_.clear();
  } else {
    run_queued();
  }
  last_signature_ = sig;
}

}  // namespace qt::rt
