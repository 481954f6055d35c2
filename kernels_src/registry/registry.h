#pragma once
// Every kernel family qtune knows. The compile service, `qtune static`, the emulator tests and the tuner
// enumerate families through here.
#include <string>
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels {

const std::vector<const KernelFamily*>& all_families();
// Throws qt::Error listing the known names if `name` is not a family.
const KernelFamily& find_family(const std::string& name);
// The family's source file read from <source root>/kernels_src/<family.source>.
std::string read_family_source(const KernelFamily& f);

}  // namespace qt::kernels
