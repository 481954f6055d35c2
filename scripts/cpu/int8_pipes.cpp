// Which of the AVX2 int8 GEMM's instructions share an execution pipe on this CPU: a few independent chains of
// each, alone and in pairs, timed. Two kinds that take the time of one share nothing; two that add up share a
// pipe. On the Zen 1 EPYC of results/cpu-vs-llama.cpp-avx2.md, vpmaddubsw and vpmaddwd add up (one pipe,
// 2 cycles a ymm instruction: the int8 product's ceiling is 32 MACs per 4 cycles), while vfmadd231ps and
// vpsignb run beside them for free.
//   g++ -O2 -mavx2 -mfma -o /tmp/int8_pipes scripts/cpu/int8_pipes.cpp && /tmp/int8_pipes
#include <chrono>
#include <cstdio>

#define CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9"
#define FOUR(op, a, b, c, d) op " %%ymm8, " a ", " a "\n\t" op " %%ymm8, " b ", " b "\n\t" op " %%ymm8, " c ", " c "\n\t" op " %%ymm8, " d ", " d "\n\t"
#define MADDUBS FOUR("vpmaddubsw", "%%ymm0", "%%ymm1", "%%ymm2", "%%ymm3")
#define MADDWD FOUR("vpmaddwd", "%%ymm4", "%%ymm5", "%%ymm6", "%%ymm7")
#define SIGNB FOUR("vpsignb", "%%ymm4", "%%ymm5", "%%ymm6", "%%ymm7")
#define FMA FOUR("vfmadd231ps", "%%ymm4", "%%ymm5", "%%ymm6", "%%ymm7")

template <class F>
void time_it(const char* name, F body) {
  constexpr long kIterations = 100000000;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kIterations; ++i) body();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%-34s %.2f ns an iteration\n", name, s / kIterations * 1e9);
}

int main() {
  {
    // The clock: a chain of dependent adds, one a cycle.
    long n = 1000000000, x = 0;
    const auto start = std::chrono::steady_clock::now();
    asm volatile("1:\n\tadd $1, %1\n\tadd $1, %1\n\tadd $1, %1\n\tadd $1, %1\n\tdec %0\n\tjnz 1b" : "+r"(n), "+r"(x));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("clock about %.2f GHz\n", 4e9 / s / 1e9);
  }
  time_it("4 vpmaddubsw", [] { asm volatile(MADDUBS ::: CLOBBERS); });
  time_it("4 vpmaddwd", [] { asm volatile(MADDWD ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 4 vpmaddwd", [] { asm volatile(MADDUBS MADDWD ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 4 vpsignb", [] { asm volatile(MADDUBS SIGNB ::: CLOBBERS); });
  time_it("4 vfmadd231ps", [] { asm volatile(FMA ::: CLOBBERS); });
  time_it("4 vpmaddubsw + 4 vfmadd231ps", [] { asm volatile(MADDUBS FMA ::: CLOBBERS); });
}
