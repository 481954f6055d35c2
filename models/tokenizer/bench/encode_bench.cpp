// qtok_bench: single-thread encode throughput of qt::tok::Tokenizer on a text file, in the same units the
// peer script (scripts/tokenizer/bench_peer.py) reports for HF tokenizers.
//   qtok_bench --text FILE [--tokenizer PATH] [--repeat N] [--docs]   (plain CLI, prints one JSON line)
#include <benchmark/benchmark.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/flag_ranges.h"
#include "common/paths.h"
#include "models/tokenizer/tokenizer.h"

namespace {

std::vector<std::string> split_docs(const std::string& text, bool by_line) {
  std::vector<std::string> docs;
  if (!by_line) {
    docs.push_back(text);
    return docs;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    docs.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return docs;
}

// CPU time of this process: on a shared machine wall time mostly measures other people's jobs.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  return qt::run_tool("qtok_bench", [&]() -> int {
    qt::CliArgs args("qtok_bench", "Single-thread encode throughput (MB/s) of the qtune tokenizer.");
    args.option("--text", "FILE", "UTF-8 text to encode");
    args.option("-t,--tokenizer", "PATH", "tokenizer.json", qt::default_hf_tokenizer_path());
    args.option("--repeat", "N", "timed passes (best is reported)", "5").range(qt::flag_ranges::kRepetitions);
    args.flag("--lines", "encode each line as its own document (as a batch of short prompts)");
    args.flag("--cold", "a fresh tokenizer per pass, so no pre-token cache carries over between passes");
    if (!args.parse(argc, argv)) return 0;
    if (!args.given("--text")) throw qt::Error("--text FILE is required");
    std::ifstream in(args.get("--text"), std::ios::binary);
    if (!in) qt::fail_file(args.get("--text"), "cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const auto docs = split_docs(text, args.get_flag("--lines"));
    const int64_t repeat = args.get_int("--repeat");
    double best = 1e30, best_cpu = 1e30;
    size_t n_ids = 0;
    std::vector<int32_t> ids;
    auto pass = [&](const qt::tok::Tokenizer& tk) {
      auto t0 = std::chrono::steady_clock::now();
      double c0 = cpu_seconds();
      n_ids = 0;
      for (const auto& d : docs) {
        ids.clear();
        tk.encode_into(d, ids);
        n_ids += ids.size();
        benchmark::DoNotOptimize(ids.data());
      }
      best_cpu = std::min(best_cpu, cpu_seconds() - c0);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    if (args.get_flag("--cold")) {
      for (int64_t r = 0; r < repeat; ++r) pass(qt::tok::Tokenizer::load(args.get("--tokenizer")));
    } else {
      qt::tok::Tokenizer tk = qt::tok::Tokenizer::load(args.get("--tokenizer"));
      for (const auto& d : docs) tk.encode(d);  // warm-up, like HF's BPE cache after a first pass
      for (int64_t r = 0; r < repeat; ++r) pass(tk);
    }
    const double mb = static_cast<double>(text.size()) / 1e6;
    std::printf("{\"impl\": \"qtune\", \"bytes\": %zu, \"docs\": %zu, \"ids\": %zu, \"seconds\": %.6f, "
                "\"cpu_seconds\": %.6f, \"mb_per_s\": %.3f, \"mb_per_s_cpu\": %.3f}\n",
                text.size(), docs.size(), n_ids, best, best_cpu, mb / best, mb / best_cpu);
    return 0;
  });
}
