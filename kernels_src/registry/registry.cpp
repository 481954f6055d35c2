#include "kernels_src/registry/registry.h"

#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/paths.h"
#include "kernels_src/awq/awq_family.h"

namespace qt::kernels {

const std::vector<const KernelFamily*>& all_families() {
  // One line per family.
  static const std::vector<const KernelFamily*> families = {
      &awq::dequant_family(),
      &awq::gemv_family(),
      &awq::gemm_family(),
  };
  return families;
}

const KernelFamily& find_family(const std::string& name) {
  std::string known;
  for (const KernelFamily* f : all_families()) {
    if (f->name == name) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
  }
  throw Error("unknown kernel family '" + name + "' (known: " + known + ")");
}

std::string read_family_source(const KernelFamily& f) {
  const std::string path = source_root() + "/kernels_src/" + f.source;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the source of kernel family " + f.name + " (set QTUNE_HOME?)", kExitFailure);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace qt::kernels
