#pragma once
// Whether a CUDA GPU can be used: the driver library is loaded at run time (never linked), initialised,
// and asked for devices. Without a driver or a GPU the answer says which, in one line.
#include <string>

namespace qt::tune {

struct CudaProbe {
  bool available = false;
  int devices = 0;
  std::string reason;  // why not, or the first device's name
};

CudaProbe probe_cuda();

}  // namespace qt::tune
