#pragma once
// A seeded generator whose streams are identical on every platform and standard library: the
// <random> distributions are implementation-defined, and a strategy must replay exactly for a seed.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace qt {

class Rng {
 public:
  // The seed is scrambled into the starting state: splitmix64 advances its state by a constant, so seeds
  // used directly as states would give streams that are shifted copies of each other (seed s+1 = seed s
  // one draw later), and "independent" runs would all see nearly the same points.
  explicit Rng(uint64_t seed) : state_(mix(seed ^ 0x632BE59BD9B4E019ull) ^ mix(~seed)) {}

  uint64_t next() { return mix(state_ += kGamma); }  // splitmix64
  // Uniform in [0, n) without modulo bias.
  uint64_t below(uint64_t n) {
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next(); while (x >= limit);
    return x % n;
  }
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  // n draws of below(256) into `out`: the same bytes, and the same state after, as n calls in turn. The i-th
  // draw of splitmix64 is mix(state + i * gamma), so ranges of the stream are made on every core (rng.cpp): a
  // tuning job's inputs of hundreds of MB (a MoE layer's expert codes) took seconds a job on one.
  void fill_bytes(uint8_t* out, size_t n);
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  bool chance(double p) { return uniform() < p; }

  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

}  // namespace qt
