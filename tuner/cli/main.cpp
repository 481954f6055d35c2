// qtune: tunes qtune's kernels (the cpu device measured here; cuda when a GPU exists), replays recorded
// GPU spaces to compare search strategies, and manages the results store.
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "tuner/cli/commands.h"
#include "tuner/family/candidate.h"
#include "tuner/worker/worker.h"

namespace {
const char* kUsage =
    "usage:\n"
    "  qtune --device cpu (--model X.bin | --shape N,K,G --type q8_0) [--cache FILE] [--strategy S] [--budget B]\n"
    "  qtune --model X.bin --gpu sm86      (tune on the GPU; without one: static compile-and-prune only)\n"
    "  qtune --points FILE --gpu sm90      (measure the points an experiments file lists, into the store)\n"
    "  qtune replay --space FILE --strategy S --budget B --seeds N [--json]\n"
    "  qtune store (export|import|import-kt|lookup|regret|check) ...\n"
    "  qtune static ...                    (NVRTC compile-and-prune report)\n"
    "  qtune profile --device emu --family F [--point P] [--shape S] [--json FILE]   (memory profile, SASS mix)\n"
    "  qtune families                      (every kernel family and the size of its space)\n"
    "  qtune devices                       (cpu, emulator and GPU here, with their store fingerprints)\n"
    "  qtune --device cpu --help           (all tuning options)\n"
    "  qtune <command> --help              (options of replay, store SUB, static)\n";
}

int main(int argc, char** argv) {
  return qt::run_tool("qtune", [&] {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) throw qt::Error("no command given (`qtune help` lists the commands)");
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "replay") return qt::tune::replay_command(rest);
    if (args[0] == "store") return qt::tune::store_command(rest);
    if (args[0] == "static") return qt::tune::static_command(rest);
    if (args[0] == "profile") return qt::tune::profile_command(rest);
    if (args[0] == "families") return qt::tune::families_command(rest);
    if (args[0] == "devices") return qt::tune::devices_command(rest);
    // A tuning run's worker process: qtune starts it (fork + exec) and feeds it candidates over fds 3 and 4.
    if (args[0] == "worker") return qt::tune::serve_worker_requests(qt::tune::handle_candidate_request);
    if (args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (args[0].rfind("-", 0) != 0)
      throw qt::Error("unknown command '" + args[0] + "' (`qtune help` lists the commands)");
    return qt::tune::tune_command(args);
  });
}
