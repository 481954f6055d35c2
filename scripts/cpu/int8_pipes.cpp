// Which of the AVX2 int8 GEMM's instructions share an execution pipe on this CPU: independent chains of each,
// alone and in pairs, timed in cycles (the clock is measured first). Two kinds that take the time of one share
// nothing; two that add up share a pipe. Enough chains (8) that a chain's latency never sets the time: with 4
// chains, vfmadd231ps (latency 5) hid inside vpmaddubsw's time and looked free beside it, and it is not.
//   g++ -O2 -mavx2 -mfma -o /tmp/int8_pipes scripts/cpu/int8_pipes.cpp && /tmp/int8_pipes
// What it printed on the Zen 1 EPYC of results/cpu-vs-llama.cpp-avx2.md is quoted there.
#include <chrono>
#include <cstdio>

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

double g_ghz = 0;

template <class F>
void time_it(const char* name, F body) {
  constexpr long kIterations = 50000000;
  for (long i = 0; i < kIterations / 50; ++i) body();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kIterations; ++i) body();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%-34s %5.2f cycles an iteration\n", name, s / kIterations * g_ghz * 1e9);
}

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
}
