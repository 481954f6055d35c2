#pragma once
// Resource usage of each compiled kernel as ptxas reports it (NVRTC log with -Xptxas=-v, or standalone
// `ptxas -v`). This is what qtune knows about a point before any GPU runs it: registers decide occupancy,
// spills mean local-memory traffic, shared memory and barriers bound residency.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qt::compile {

struct KernelResources {
  std::string function;  // mangled entry name as ptxas prints it
  int arch = 0;          // 80 for sm_80, 0 when the log does not say
  int registers = 0;
  int barriers = 0;
  int64_t static_smem = 0;  // bytes of __shared__ declared in the kernel (dynamic smem is a launch choice)
  int64_t stack_frame = 0;
  int64_t spill_stores = 0;
  int64_t spill_loads = 0;
  int64_t cmem0 = 0;  // parameter/constant bank 0; absent on sm_90+ logs
  // Not ptxas' but the PTX's: the instructions one trip of the main loop issues, by its text
  // (device/jit/ptx_main_loop.h), for the static model's issue time. 0: no loop, or not known.
  int loop_instructions = 0;
  bool spills() const { return spill_stores > 0 || spill_loads > 0; }
};

// Parses every entry function found in `log`. Lines it does not understand are ignored (the format varies
// between ptxas versions and targets); an entry whose "Used ... registers" line is missing is dropped, since
// without it nothing about the kernel is known.
std::vector<KernelResources> parse_ptxas_log(const std::string& log);

// The entry for `function` in `reports`, or throws qt::Error naming it.
const KernelResources& find_kernel(const std::vector<KernelResources>& reports, const std::string& function);

void to_json(nlohmann::json& j, const KernelResources& r);
void from_json(const nlohmann::json& j, KernelResources& r);

}  // namespace qt::compile
