#pragma once
// "13.0" for 13000: the driver's and the toolkit's version numbers as the store's fingerprint writes them.
#include <string>

namespace qt::cuda {

std::string cuda_version_text(int version);

}  // namespace qt::cuda
