#pragma once
// The device backend's view of activations: an Act's device address, and the bytes of fp16 elements.
#include <cstdint>

#include "device/api/device.h"
#include "runtime/core/backend.h"

namespace qt::rt {

inline dev::DevPtr dp(Act a) { return dev::DevPtr{a.addr}; }
inline int64_t h16(int64_t elements) { return elements * 2; }

}  // namespace qt::rt
