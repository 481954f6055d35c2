#pragma once
// Every kernel family qtune knows, device and host alike. The compile service, `qtune static`, verification,
// the tuner and the runtime's winner lookup enumerate families through here.
#include <string>
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels {

const std::vector<const KernelFamily*>& all_families();
// Throws qt::Error listing the known names if `name` is not a family.
const KernelFamily& find_family(const std::string& name);
// Adds a family defined outside kernels_src (a test's scripted family); must happen before a tuner worker
// forks so the worker knows it too. A name already known is replaced.
void add_family(const KernelFamily* family);
// The family's source file read from <source root>/kernels_src/<family.source>.
std::string read_family_source(const KernelFamily& f);

}  // namespace qt::kernels
