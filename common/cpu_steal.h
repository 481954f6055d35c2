#pragma once
// The CPU time a hypervisor took from this process's CPUs ("steal" in /proc/stat). A vCPU that the host
// deschedules stops a parallel decode step at its next join, with the other threads waiting, so a figure
// measured on a VM (a share of the memory bandwidth above all) says how much of its time was stolen.
#include <cstdint>
#include <string>
#include <vector>

namespace qt {

struct CpuTimes {
  uint64_t total = 0;  // clock ticks, every state (user ... steal) summed
  uint64_t steal = 0;
  bool known = false;  // false: no /proc/stat, or a kernel without the steal field, or none of the CPUs listed
};

// The sum of /proc/stat's per-CPU lines ("cpuN ...") for the CPUs in `cpus`; throws qt::Error on a line that
// names one of them and is not a list of counters.
CpuTimes parse_proc_stat(const std::string& text, const std::vector<int>& cpus);

// The CPUs this process may run on (its affinity set), read from /proc/stat now.
CpuTimes read_cpu_times();

// The stolen share of the CPU time between two readings, or a negative value when either is unknown or no
// tick passed.
double steal_fraction(const CpuTimes& before, const CpuTimes& after);

}  // namespace qt
