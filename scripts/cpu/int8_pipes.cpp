// Which of the AVX2 int8 GEMM's instructions share an execution pipe on this CPU: independent chains of each,
// alone and in pairs, timed in cycles (the clock is measured first). Two kinds that take the time of one share
// nothing; two that add up share a pipe. Enough chains (8) that a chain's latency never sets the time: with 4
// chains, vfmadd231ps (latency 5) hid inside vpmaddubsw's time and looked free beside it, and it is not.
// Then whether rows on FP32 FMA add products beside the int16 prefill tile (runtime/cpu/q8_gemm_kernels_avx2.cpp,
// tile_wide): the tile's inner step alone (8 rows x 4 columns x 4 tokens on vpmaddwd, weights and activations in
// L1), FMA alone (8 more rows x 2 tokens from float copies, 4 chains so that latency does not bound it), and both
// in one loop, in products a cycle. Both in one loop beating the tile alone would mean the FMA pipe has room.
// Last, the ceiling of the 3-token tile's step with nothing but its multiplies and adds (see TILE_STEP).
//   g++ -O3 -mavx2 -mfma -o /tmp/int8_pipes scripts/cpu/int8_pipes.cpp && /tmp/int8_pipes
// What it printed on the Zen 1 EPYC of results/cpu-vs-llama.cpp-avx2.md is quoted there, and on a Zen 3 EPYC in
// results/cpu-vs-llama.cpp-avx2-zen3.md.
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#define CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
                 "xmm12", "xmm13", "xmm14", "xmm15"
#define ON(op, r) op " %%ymm15, %%ymm" #r ", %%ymm" #r "\n\t"
#define FOUR(op) ON(op, 0) ON(op, 1) ON(op, 2) ON(op, 3)
#define EIGHT(op) ON(op, 4) ON(op, 5) ON(op, 6) ON(op, 7) ON(op, 8) ON(op, 9) ON(op, 10) ON(op, 11)
#define MADDUBS FOUR("vpmaddubsw")
#define MADDWD ON("vpmaddwd", 12) ON("vpmaddwd", 13) ON("vpmaddwd", 14) ON("vpmaddwd", 3)
#define FMA EIGHT("vfmadd231ps")
#define PADDD EIGHT("vpaddd")
#define SIGNB EIGHT("vpsignb")
#define SRAD "vpsrad $16, %%ymm15, %%ymm4\n\tvpsrad $16, %%ymm15, %%ymm5\n\tvpsrad $16, %%ymm15, %%ymm6\n\t" \
             "vpsrad $16, %%ymm15, %%ymm7\n\t"
#define CVT "vcvtdq2ps %%ymm15, %%ymm12\n\tvcvtdq2ps %%ymm15, %%ymm13\n\t"

// The 3-token tile's step (runtime/cpu/q8_gemm_kernels_avx2.cpp, tile_wide<3>) with nothing but its multiplies
// and adds: 12 vpmaddwd, each feeding a vpaddd into one of 6 sums, all in registers. Against 12 independent
// vpmaddwd it says what the adds cost beside the multiplies, with no load in the way.
#define MADD_INTO(t, acc) "vpmaddwd %%ymm14, %%ymm15, %%ymm" #t "\n\t" "vpaddd %%ymm" #t ", %%ymm" #acc ", %%ymm" #acc "\n\t"
#define TILE_STEP MADD_INTO(6, 0) MADD_INTO(7, 0) MADD_INTO(8, 1) MADD_INTO(9, 1) MADD_INTO(10, 2) MADD_INTO(11, 2) \
                  MADD_INTO(12, 3) MADD_INTO(13, 3) MADD_INTO(6, 4) MADD_INTO(7, 4) MADD_INTO(8, 5) MADD_INTO(9, 5)
#define MADD_ONLY(t) "vpmaddwd %%ymm14, %%ymm15, %%ymm" #t "\n\t"
#define MADD12 MADD_ONLY(0) MADD_ONLY(1) MADD_ONLY(2) MADD_ONLY(3) MADD_ONLY(4) MADD_ONLY(5) MADD_ONLY(6) \
               MADD_ONLY(7) MADD_ONLY(8) MADD_ONLY(9) MADD_ONLY(10) MADD_ONLY(11)

double g_ghz = 0;

// Seconds that run(n) takes, after an untimed run(n / 50) to warm up.
template <class F>
double seconds(F run, long n) {
  run(n / 50);
  const auto start = std::chrono::steady_clock::now();
  run(n);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class F>
void time_it(const char* name, F body) {
  constexpr long kIterations = 50000000;
  const double s = seconds([&](long n) { for (long i = 0; i < n; ++i) body(); }, kIterations);
  std::printf("%-34s %5.2f cycles an iteration\n", name, s / kIterations * g_ghz * 1e9);
}

namespace {

constexpr int kK = 1024;
alignas(64) int16_t g_w16[kK / 4 * 32];  // 8 rows, widened as tile_wide lays them out: 32 int16 a step
alignas(64) int16_t g_x16[4][kK];
alignas(64) float g_wf[kK * 8];  // 8 other rows as floats, the 8 rows of one column together
alignas(64) float g_xf[4][kK];
int32_t g_sink_i[32];
float g_sink_f[16];

inline __m256i int_step(__m256i s, __m256i w01, __m256i w23, const int16_t* x) {
  int32_t a, b;
  std::memcpy(&a, x, 4);
  std::memcpy(&b, x + 2, 4);
  return _mm256_add_epi32(s, _mm256_add_epi32(_mm256_madd_epi16(w01, _mm256_set1_epi32(a)),
                                              _mm256_madd_epi16(w23, _mm256_set1_epi32(b))));
}

template <bool kInt, bool kFma>
__attribute__((noinline)) void run(long reps) {
  for (long r = 0; r < reps; ++r) {
    __m256i s[4] = {};
    __m256 f[2][2] = {};
    for (int c = 0; c < kK; c += 4) {
      if constexpr (kInt) {
        const __m256i w01 = _mm256_load_si256(reinterpret_cast<const __m256i*>(g_w16 + c * 8));
        const __m256i w23 = _mm256_load_si256(reinterpret_cast<const __m256i*>(g_w16 + c * 8 + 16));
        for (int t = 0; t < 4; ++t) s[t] = int_step(s[t], w01, w23, g_x16[t] + c);
      }
      if constexpr (kFma) {
        for (int j = 0; j < 4; ++j) {
          const __m256 wf = _mm256_load_ps(g_wf + (c + j) * 8);
          for (int t = 0; t < 2; ++t)
            f[t][j & 1] = _mm256_fmadd_ps(wf, _mm256_broadcast_ss(g_xf[t] + c + j), f[t][j & 1]);
        }
      }
    }
    for (int t = 0; t < 4; ++t) _mm256_storeu_si256(reinterpret_cast<__m256i*>(g_sink_i + 8 * t), s[t]);
    for (int t = 0; t < 2; ++t) _mm256_storeu_ps(g_sink_f + 8 * t, _mm256_add_ps(f[t][0], f[t][1]));
  }
}

template <class F>
void time_step(const char* name, F body, int products_a_step) {
  constexpr long kReps = 40000;
  const double cycles = seconds(body, kReps) / kReps / (kK / 4) * g_ghz * 1e9;
  std::printf("%-24s %6.2f cycles a step, %5.2f products a cycle\n", name, cycles, products_a_step / cycles);
}

}  // namespace

int main() {
  {
    // The clock: a chain of dependent adds, one a cycle.
    long n = 1000000000, x = 0;
    const auto start = std::chrono::steady_clock::now();
    asm volatile("1:\n\tadd $1, %1\n\tadd $1, %1\n\tadd $1, %1\n\tadd $1, %1\n\tdec %0\n\tjnz 1b" : "+r"(n), "+r"(x));
    g_ghz = 4e9 / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 1e9;
    std::printf("clock about %.2f GHz\n", g_ghz);
  }
  time_it("4 vpmaddubsw", [] { asm volatile(MADDUBS ::: CLOBBERS); });
  time_it("4 vpmaddwd", [] { asm volatile(MADDWD ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 4 vpmaddwd", [] { asm volatile(MADDUBS MADDWD ::: CLOBBERS); });
  time_it("8 vfmadd231ps", [] { asm volatile(FMA ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 8 vfmadd231ps", [] { asm volatile(MADDUBS FMA ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 4 vpmaddwd + 8 vfmadd", [] { asm volatile(MADDUBS MADDWD FMA ::: CLOBBERS); });
  time_it("2 vcvtdq2ps", [] { asm volatile(CVT ::: CLOBBERS); });
  time_it("8 vfmadd231ps + 2 vcvtdq2ps", [] { asm volatile(FMA CVT ::: CLOBBERS); });
  time_it("8 vpsignb", [] { asm volatile(SIGNB ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 8 vpsignb", [] { asm volatile(MADDUBS SIGNB ::: CLOBBERS); });
  time_it("8 vpaddd", [] { asm volatile(PADDD ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 8 vpaddd", [] { asm volatile(MADDUBS PADDD ::: CLOBBERS); });
  time_it("4 vpsrad", [] { asm volatile(SRAD ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 4 vpsrad", [] { asm volatile(MADDUBS SRAD ::: CLOBBERS); });

  for (int i = 0; i < kK / 4 * 32; ++i) g_w16[i] = static_cast<int16_t>(i % 200 - 100);
  for (int i = 0; i < kK * 8; ++i) g_wf[i] = static_cast<float>(i % 200 - 100);
  for (int t = 0; t < 4; ++t)
    for (int k = 0; k < kK; ++k) g_xf[t][k] = g_x16[t][k] = static_cast<int16_t>((k * 11 + t) % 255 - 127);
  for (int round = 0; round < 2; ++round) {
    time_step("int16 tile (128 a step)", run<true, false>, 128);
    time_step("FMA rows (64 a step)", run<false, true>, 64);
    time_step("both (192 a step)", run<true, true>, 192);
  }
  time_it("12 vpmaddwd (independent)", [] { asm volatile(MADD12 ::: CLOBBERS); });
  time_it("3-token tile step, registers only", [] { asm volatile(TILE_STEP ::: CLOBBERS); });
}
