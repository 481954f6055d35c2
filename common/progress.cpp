#include "common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace qt {

Progress::Progress(std::string label, double total, std::string unit, bool quiet, double show_after_s)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0), show_after_s_(show_after_s), start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_ && tty_ && !quiet_ && (shown_ || show_after_s_ <= 0)) std::fputc('\n', stderr);
}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(double done, const std::string& detail) {
  if (quiet_) return;
  auto now = std::chrono::steady_clock::now();
  const bool delayed = show_after_s_ > 0;
  if (delayed && elapsed_seconds() < show_after_s_) return;
  double since = std::chrono::duration<double>(now - last_draw_).count();
  if (!(delayed && !shown_) && since < (tty_ ? 0.1 : 5.0)) return;
  last_draw_ = now;
  draw(done, detail, false);
}

void Progress::finish(const std::string& summary) {
  if (quiet_ || finished_) return;
  finished_ = true;
  if (show_after_s_ > 0 && !shown_ && elapsed_seconds() < show_after_s_) return;
  draw(total_, summary, true);
}

void Progress::draw(double done, const std::string& detail, bool final_line) {
  double t = elapsed_seconds();
  double rate = t > 0 ? done / t : 0;
  double pct = total_ > 0 ? 100.0 * done / total_ : 100.0;
  char buf[256];
  if (final_line) {
    std::snprintf(buf, sizeof buf, "%s: %.1f %s in %.2f s (%.1f %s/s)", label_.c_str(), done, unit_.c_str(), t,
                  rate, unit_.c_str());
  } else {
    double eta = rate > 0 ? (total_ - done) / rate : 0;
    std::snprintf(buf, sizeof buf, "%s: %5.1f%% %.1f/%.1f %s, %.1f %s/s, ETA %.0f s", label_.c_str(), pct, done,
                  total_, unit_.c_str(), rate, unit_.c_str(), eta);
  }
  shown_ = true;
  std::string line = buf;
  if (!detail.empty()) line += " " + detail;
  if (tty_) std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  else std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      uint64_t kb = 0;
      fields >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace qt
