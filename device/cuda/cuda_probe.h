#pragma once
// Whether a CUDA GPU can be used, asked of the lazily loaded driver (cuda_driver.h): without a driver or a
// GPU the answer says which, in one line. Callers that need the device turn !available into an error with
// exit code kExitUnavailable.
#include <string>

namespace qt::tune {

struct CudaProbe {
  bool available = false;
  int devices = 0;
  std::string reason;  // why not, or the first device's name
};

CudaProbe probe_cuda();

}  // namespace qt::tune
