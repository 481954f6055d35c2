// Quantizer throughput (weights per second) for each stored type, and the cost of opening and
// validating a model file. Run: <build>/bin/bench_formats [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <vector>

#include "models/formats/model_file.h"
#include "models/formats/model_writer.h"
#include "models/quant/quantized_tensor.h"

namespace {

std::vector<float> weights(size_t n) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void BM_Quantize(benchmark::State& state, qt::WeightType type) {
  const int64_t N = state.range(0), K = state.range(1);
  const std::vector<float> w = weights(static_cast<size_t>(N * K));
  const int32_t group = type == qt::WeightType::Q8_0 ? 64 : 128;
  for (auto _ : state) {
    auto q = qt::quant::quantize_tensor(w.data(), N, K, type, group);
    benchmark::DoNotOptimize(q.values.data());
  }
  state.SetItemsProcessed(state.iterations() * N * K);
  state.SetBytesProcessed(state.iterations() * N * K * 4);
}

void BM_Dequantize(benchmark::State& state, qt::WeightType type) {
  const int64_t N = 1024, K = 1024;
  const std::vector<float> w = weights(static_cast<size_t>(N * K));
  const auto q = qt::quant::quantize_tensor(w.data(), N, K, type, 128);
  const qt::QTensor t = q.view();
  std::vector<float> row(static_cast<size_t>(K));
  int64_t n = 0;
  for (auto _ : state) {
    qt::dequantize_row(t, n, row.data());
    benchmark::DoNotOptimize(row.data());
    n = (n + 1) % N;
  }
  state.SetItemsProcessed(state.iterations() * K);
}

// Open + validate + build views of a Qwen3-0.6B-shaped ajc1 file with 2 layers and a small vocab.
void BM_OpenAjc1(benchmark::State& state) {
  const std::string path = (std::filesystem::temp_directory_path() / "qtune-bench-open.bin").string();
  qt::WriterOptions o;
  o.format = qt::FileFormat::AJC1;
  qt::ModelConfig& c = o.config;
  c.dim = 1024, c.hidden_dim = 3072, c.n_layers = 2, c.n_heads = 16, c.n_kv_heads = 8, c.vocab_size = 4096;
  c.max_seq_len = 40960, c.head_dim = 128, c.shared_classifier = true;
  {
    auto w = qt::ModelWriter::create(path, o);
    for (const auto& s : w->plan()) {
      const std::vector<float> v = weights(static_cast<size_t>(s.rows * s.cols));
      w->write_float(s, v.data());
    }
    w->finish();
  }
  for (auto _ : state) {
    auto f = qt::ModelFile::open(path);
    benchmark::DoNotOptimize(f->weights().layers.data());
  }
  std::filesystem::remove(path);
}

}  // namespace

BENCHMARK_CAPTURE(BM_Quantize, Q8_0, qt::WeightType::Q8_0)->Args({1024, 4096})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, INT8_GW_SYM, qt::WeightType::INT8_GW_SYM)->Args({1024, 4096})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, INT8_GW_ASYM, qt::WeightType::INT8_GW_ASYM)->Args({1024, 4096})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, AWQ_INT4, qt::WeightType::AWQ_INT4)->Args({1024, 4096})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, F16, qt::WeightType::F16)->Args({1024, 4096})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Dequantize, Q8_0, qt::WeightType::Q8_0);
BENCHMARK_CAPTURE(BM_Dequantize, AWQ_INT4, qt::WeightType::AWQ_INT4);
BENCHMARK(BM_OpenAjc1)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
