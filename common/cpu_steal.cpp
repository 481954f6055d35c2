#include "common/cpu_steal.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace qt {

CpuTimes parse_proc_stat(const std::string& text, const std::vector<int>& cpus) {
  CpuTimes t;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    // Per-CPU lines only: "cpu " is the machine's sum, which counts CPUs the process cannot use.
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    fields >> cpu;
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is inside user already.
    std::vector<uint64_t> v;
    for (uint64_t x; fields >> x;) v.push_back(x);
    if (!fields.eof() || v.size() < 4)
      throw Error("/proc/stat: the line of cpu" + std::to_string(cpu) + " is not a list of counters: " + line);
    if (v.size() < 8) return CpuTimes{};  // Linux before 2.6.11 counted no steal
    for (size_t i = 0; i < 8; ++i) t.total += v[i];
    t.steal += v[7];
    t.known = true;
  }
  return t;
}

CpuTimes read_cpu_times() {
  std::ifstream f("/proc/stat");
  if (!f) return CpuTimes{};
  std::ostringstream text;
  text << f.rdbuf();
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return CpuTimes{};
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return parse_proc_stat(text.str(), cpus);
}

double steal_fraction(const CpuTimes& before, const CpuTimes& after) {
  if (!before.known || !after.known || after.total <= before.total || after.steal < before.steal) return -1.0;
  return double(after.steal - before.steal) / double(after.total - before.total);
}

}  // namespace qt
