#include "device/arch/ptxas_report.h"

#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace qt::compile {
namespace {

// Extracts the integer before `suffix` in `line` ("14 registers" -> 14); -1 if absent.
int64_t number_before(const std::string& line, const std::regex& re) {
  std::smatch m;
  if (std::regex_search(line, m, re)) return std::stoll(m[1].str());
  return -1;
}

}  // namespace

std::vector<KernelResources> parse_ptxas_log(const std::string& log) {
  static const std::regex compiling(R"(Compiling entry function '([^']+)' for 'sm_(\d+)a?')");
  static const std::regex properties(R"(Function properties for ([^\s]+))");
  static const std::regex registers(R"(Used (\d+) registers)");
  static const std::regex barriers(R"(used (\d+) barriers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex cmem0(R"((\d+) bytes cmem\[0\])");
  static const std::regex stack(R"((\d+) bytes stack frame)");
  static const std::regex stores(R"((\d+) bytes spill stores)");
  static const std::regex loads(R"((\d+) bytes spill loads)");

  std::vector<KernelResources> out;
  std::map<std::string, size_t> index;
  std::string current;  // the function the following lines describe
  std::vector<bool> has_registers;
  auto entry = [&](const std::string& name) -> KernelResources& {
    auto it = index.find(name);
    if (it == index.end()) {
      it = index.emplace(name, out.size()).first;
      out.push_back(KernelResources{});
      out.back().function = name;
      has_registers.push_back(false);
    }
    return out[it->second];
  };

  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, compiling)) {
      current = m[1].str();
      entry(current).arch = std::stoi(m[2].str());
      continue;
    }
    if (std::regex_search(line, m, properties)) {
      current = m[1].str();
      entry(current);
      continue;
    }
    if (current.empty()) continue;
    KernelResources& r = entry(current);
    if (int64_t v = number_before(line, stack); v >= 0) r.stack_frame = v;
    if (int64_t v = number_before(line, stores); v >= 0) r.spill_stores = v;
    if (int64_t v = number_before(line, loads); v >= 0) r.spill_loads = v;
    if (int64_t v = number_before(line, registers); v >= 0) {
      r.registers = static_cast<int>(v);
      has_registers[index[current]] = true;
      if (int64_t b = number_before(line, barriers); b >= 0) r.barriers = static_cast<int>(b);
      if (int64_t s = number_before(line, smem); s >= 0) r.static_smem = s;
      if (int64_t c = number_before(line, cmem0); c >= 0) r.cmem0 = c;
    }
  }
  std::vector<KernelResources> complete;
  for (size_t i = 0; i < out.size(); ++i)
    if (has_registers[i]) complete.push_back(out[i]);
  return complete;
}

const KernelResources& find_kernel(const std::vector<KernelResources>& reports, const std::string& function) {
  for (const auto& r : reports)
    if (r.function == function) return r;
  throw Error("ptxas report has no entry for kernel '" + function + "'", kExitFailure);
}

void to_json(nlohmann::json& j, const KernelResources& r) {
  j = nlohmann::json{{"function", r.function},         {"arch", r.arch},
                     {"registers", r.registers},       {"barriers", r.barriers},
                     {"static_smem", r.static_smem},   {"stack_frame", r.stack_frame},
                     {"spill_stores", r.spill_stores}, {"spill_loads", r.spill_loads},
                     {"cmem0", r.cmem0},               {"loop_instructions", r.loop_instructions}};
}

void from_json(const nlohmann::json& j, KernelResources& r) {
  r.function = j.at("function").get<std::string>();
  r.arch = j.at("arch").get<int>();
  r.registers = j.at("registers").get<int>();
  r.barriers = j.at("barriers").get<int>();
  r.static_smem = j.at("static_smem").get<int64_t>();
  r.stack_frame = j.at("stack_frame").get<int64_t>();
  r.spill_stores = j.at("spill_stores").get<int64_t>();
  r.spill_loads = j.at("spill_loads").get<int64_t>();
  r.cmem0 = j.at("cmem0").get<int64_t>();
  r.loop_instructions = j.value("loop_instructions", 0);  // absent from what qtune wrote before it was read
}

}  // namespace qt::compile
