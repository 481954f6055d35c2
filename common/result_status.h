#pragma once
// The outcome of evaluating one candidate. Every failure class is kept apart so a run can report (and the
// store can remember) why a point has no time, and none of them stops the tuning run.
#include <string>

namespace qt {

enum class Status {
  Ok,              // measured and verified
  RacedOut,        // verified, timing stopped early: clearly slower than the incumbent (time is a lower bound)
  WrongResult,     // output differs from the family's reference beyond the dtype tolerance
  CompileFailed,   // the compiler rejected the candidate
  ResourceFailed,  // too many registers / shared memory / threads for the device, or launch refused
  RuntimeError,    // the candidate ran and reported an error
  Crashed,         // the worker process died (signal or unexpected exit)
  Timeout,         // the worker did not answer in time and was killed
  Invalid          // the point violates a constraint (only from imported data)
};

const char* status_name(Status s);
Status parse_status(const std::string& name);  // throws qt::Error on an unknown name
inline bool has_time(Status s) { return s == Status::Ok || s == Status::RacedOut; }

}  // namespace qt
