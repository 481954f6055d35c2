#include "device/jit/sass_mix.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "device/jit/main_loop_range.h"

namespace qt::compile {
namespace fs = std::filesystem;

namespace {

int run(const std::string& cmd, std::string& out) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool executable(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p); }

}  // namespace

std::optional<std::string> find_nvdisasm() {
  if (const char* e = std::getenv("QTUNE_NVDISASM"); e && *e) {
    if (executable(e)) return std::string(e);
    return std::nullopt;
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty() && executable(fs::path(dir) / "nvdisasm")) return (fs::path(dir) / "nvdisasm").string();
  }
  if (executable("/usr/local/cuda/bin/nvdisasm")) return std::string("/usr/local/cuda/bin/nvdisasm");
  // pip install nvidia-cuda-nvdisasm puts it under site-packages/nvidia/<package>/bin.
  std::string out;
  if (run("python3 -c \"import nvidia, os; [print(os.path.join(p, d, 'bin', 'nvdisasm')) for p in nvidia.__path__ "
          "for d in sorted(os.listdir(p))]\" 2>/dev/null",
          out) == 0) {
    std::stringstream ss(out);
    std::string line;
    while (std::getline(ss, line))
      if (executable(line)) return line;
  }
  return std::nullopt;
}

std::string sass_class(const std::string& opcode) {
  const std::string base = opcode.substr(0, opcode.find('.'));
  static const char* kKept[] = {"HMMA", "IMMA", "LDSM", "LDGSTS", "LOP3", "LDG", "LDS", "STS", "STG",
                                "FFMA", "HFMA2", "HADD2", "HMUL2", "BAR", "SHFL", "PRMT"};
  for (const char* k : kKept)
    if (base == k) return base;
  static const char* kIntAddr[] = {"IMAD", "IADD3", "LEA", "SHF", "ISETP", "IMNMX", "SEL", "MOV", "IABS",
                                   "I2F", "F2I", "IMUL", "SGXT", "BMSK", "POPC", "FLO", "UIADD3", "UMOV",
                                   "ULEA", "UIMAD", "USHF", "ULOP3", "UISETP", "USEL"};
  for (const char* k : kIntAddr)
    if (base == k) return "int_addr";
  return "other";
}

std::string disassemble(const std::string& nvdisasm, const std::vector<uint8_t>& cubin) {
  char tmpl[] = "/tmp/qtune-sass-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) throw Error("cannot create a temporary file for nvdisasm", kExitFailure);
  ::close(fd);
  {
    std::ofstream f(tmpl, std::ios::binary);
    f.write(reinterpret_cast<const char*>(cubin.data()), static_cast<std::streamsize>(cubin.size()));
  }
  std::string text;
  const int rc = run("'" + nvdisasm + "' -c '" + std::string(tmpl) + "' 2>&1", text);
  std::error_code ec;
  fs::remove(tmpl, ec);
  if (rc != 0) throw Error("nvdisasm failed: " + text.substr(0, 400), kExitFailure);
  return text;
}

std::vector<SassMix> sass_mix(const std::string& nvdisasm, const std::vector<uint8_t>& cubin) {
  return sass_mix_of(disassemble(nvdisasm, cubin));
}

std::vector<SassMix> sass_mix_of(const std::string& text) {
  struct Insn {
    uint32_t addr;
    std::string opcode, target;
  };
  std::vector<SassMix> out;
  std::vector<Insn> insns;
  std::map<std::string, uint32_t> labels;
  std::string pending_label, function;
  auto finish = [&] {
    if (function.empty()) return;
    SassMix m;
    m.function = function;
    m.total_instructions = static_cast<uint32_t>(insns.size());
    std::vector<CodeBranch> branches;
    for (const Insn& i : insns)
      if (i.opcode.rfind("BRA", 0) == 0 && labels.count(i.target)) branches.push_back({i.addr, labels[i.target]});
    if (const std::optional<CodeRange> loop = longest_backward_range(branches)) {
      for (const Insn& i : insns) {
        if (i.addr < loop->first || i.addr > loop->last) continue;
        ++m.loop_instructions;
        ++m.loop_mix[sass_class(i.opcode)];
      }
    }
    out.push_back(m);
    insns.clear();
    labels.clear();
  };
  static const std::regex kFunc(R"(^\.text\.([^:\s]+):)");
  static const std::regex kLabel(R"(^\s*(\.L_x_\d+):)");
  static const std::regex kInsn(R"(/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);)");
  static const std::regex kTarget(R"(`\((\.L_x_\d+)\))");
  std::stringstream ss(text);
  std::string line;
  std::smatch m;
  while (std::getline(ss, line)) {
    if (std::regex_search(line, m, kFunc)) {
      finish();
      function = m[1];
    } else if (std::regex_search(line, m, kLabel)) {
      pending_label = m[1];
    } else if (std::regex_search(line, m, kInsn)) {
      Insn i;
      i.addr = static_cast<uint32_t>(std::stoul(m[1], nullptr, 16));
      i.opcode = m[2];
      const std::string rest = m[3];
      std::smatch t;
      if (std::regex_search(rest, t, kTarget)) i.target = t[1];
      if (!pending_label.empty()) labels[pending_label] = i.addr, pending_label.clear();
      insns.push_back(i);
    }
  }
  finish();
  return out;
}

}  // namespace qt::compile
