#pragma once
// Progress reporting on stderr for long jobs (conversion, tuning): done/total, rate and ETA. On a terminal
// the line is redrawn in place; otherwise a line is printed at most every few seconds so logs stay short.
#include <chrono>
#include <cstdint>
#include <string>

namespace qt {

class Progress {
 public:
  // `unit` names what is counted ("MB", "points"); quiet=true prints nothing.
  Progress(std::string label, double total, std::string unit, bool quiet = false);
  ~Progress();
  void update(double done, const std::string& detail = "");
  void finish(const std::string& summary = "");
  double elapsed_seconds() const;

 private:
  void draw(double done, const std::string& detail, bool final_line);
  std::string label_, unit_;
  double total_;
  bool quiet_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// Peak resident set size of this process in bytes (VmHWM), 0 if unknown.
uint64_t peak_rss_bytes();

}  // namespace qt
