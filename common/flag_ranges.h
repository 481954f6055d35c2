#pragma once
// One range per meaning of a numeric flag, shared by every tool that takes it: a flag for the same quantity
// accepts the same values everywhere. Flags that set a model's shape or count its tokens take their ranges
// from models/core/config_limits.h, the ones the model readers enforce.
#include <cstdint>

#include "common/value_range.h"

namespace qt::flag_ranges {

// Worker threads of one process (the CPU runtime, the emulator's block runners): above the core count of
// any machine we run on, and low enough that a typo cannot use up the host's task limit.
inline constexpr IntRange kThreads{1, 1024};
// NVRTC compiles in parallel; 0 = one per hardware thread.
inline constexpr IntRange kCompileThreads{0, 256};
inline constexpr UintRange kSeed{0, UINT64_MAX};
// Timed repetitions of a measurement, or independent runs of a search.
inline constexpr IntRange kRepetitions{1, 100000};
inline constexpr IntRange kWarmupRuns{0, 100000};
// Activation rows of one linear call: a tuning bucket, a GEMM's M.
inline constexpr IntRange kBatchRows{1, 65536};
inline constexpr IntRange kCurvePoints{1, 10000};
// A measurement buffer in MiB; 0 skips the measurement.
inline constexpr IntRange kBufferMiB{0, 1 << 16};
// Tuning: one candidate's limit before its worker is killed, the least timed time per candidate, and a
// whole run's limit (0: none).
inline constexpr RealRange kCandidateTimeoutSeconds{0, 86400, /*lo_open=*/true};
inline constexpr RealRange kMinTimeSeconds{0, 3600};
inline constexpr RealRange kRunTimeLimitSeconds{0, 7 * 86400};
// A token id; the model's or tokenizer's vocabulary bounds it further.
inline constexpr IntRange kTokenId{0, INT32_MAX};

}  // namespace qt::flag_ranges
