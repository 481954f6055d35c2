// `qtune devices`: the devices this machine offers qtune, each with the fingerprint its results are stored
// under. The GPU is asked of a worker process, as the tuning flow asks it: this process never loads the CUDA
// driver. A missing GPU is a line saying why, not an error.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "device/winners/fingerprint.h"
#include "tuner/cli/commands.h"
#include "tuner/flow/gpu_tuning.h"
#include "tuner/worker/worker.h"

namespace qt::tune {

int devices_command(const std::vector<std::string>& args) {
  CliArgs cli("qtune devices", "Lists the devices qtune can tune on here, with the fingerprint each stores results under.");
  cli.flag("--json", "one JSON object: cpu, emu and cuda fingerprints (cuda: {\"unavailable\": reason} without a GPU)");
  if (!cli.parse(args)) return 0;
  const DeviceFingerprint cpu = winners::cpu_fingerprint(), emu = winners::emu_fingerprint();
  nlohmann::json j = {{"cpu", cpu.to_json()}, {"emu", emu.to_json()}};
  std::string cuda_line;
  try {
    Worker worker(self_command({"worker"}));
    const DeviceFingerprint gpu = worker_device_fingerprint(worker, "cuda", 0);
    j["cuda"] = gpu.to_json();
    char buf[512];
    std::snprintf(buf, sizeof buf, "cuda: %s %s, %d SMs, %.1f GB, %s", gpu.arch.c_str(), gpu.name.c_str(), gpu.sm_count,
                  double(gpu.memory_bytes) / 1e9, gpu.software_text().c_str());
    cuda_line = buf;
  } catch (const Error& e) {
    if (e.exit_code() != kExitUnavailable) throw;
    j["cuda"] = {{"unavailable", e.what()}};
    cuda_line = std::string("cuda: unavailable (") + e.what() + ")";
  }
  if (cli.get_flag("--json")) {
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf("cpu: %s (%s, %d threads)\n", cpu.name.c_str(), cpu.arch.c_str(), cpu.sm_count);
  std::printf("emu: the CUDA emulator, %s by default (--gpu smXX emulates another architecture)\n", emu.arch.c_str());
  std::printf("%s\n", cuda_line.c_str());
  return 0;
}

}  // namespace qt::tune
