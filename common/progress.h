#pragma once
// Progress reporting on stderr for long jobs (conversion, tuning): done/total, rate and ETA. On a terminal
// the line is redrawn in place; otherwise a line is printed at most every few seconds so logs stay short.
#include <chrono>
#include <cstdint>
#include <string>

namespace qt {

class Progress {
 public:
  // `unit` names what is counted ("MB", "points"); quiet=true prints nothing. With show_after_s > 0, work
  // that ends sooner prints nothing at all (a step that is usually quick stays silent), and longer work
  // shows its first line as soon as it passes show_after_s.
  Progress(std::string label, double total, std::string unit, bool quiet = false, double show_after_s = 0);
  ~Progress();
  void update(double done, const std::string& detail = "");
  void set_total(double total) { total_ = total; }  // work whose size grows as it goes
  void finish(const std::string& summary = "");
  double elapsed_seconds() const;

 private:
  void draw(double done, const std::string& detail, bool final_line);
  std::string label_, unit_;
  double total_;
  bool quiet_, tty_, finished_ = false, shown_ = false;
  double show_after_s_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// Peak resident set size of this process in bytes (VmHWM), 0 if unknown.
uint64_t peak_rss_bytes();

}  // namespace qt
