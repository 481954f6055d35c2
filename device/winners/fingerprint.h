#pragma once
// The store identities of the devices that are not a dev::Device: this CPU (host kernel families) and the
// emulator of an architecture (EmuDevice::store_fingerprint() returns it). A GPU's comes from its
// CudaDevice only (device/cuda/cuda_fingerprint.h), never from a name and an architecture.
#include "device/api/device_fingerprint.h"

namespace qt::winners {

using dev::DeviceFingerprint;

// This CPU: model name, best instruction set, threads, memory, last-level cache.
DeviceFingerprint cpu_fingerprint();
// The CPU emulator of an architecture: its results are correctness only, so nothing of the host enters.
DeviceFingerprint emu_fingerprint(int arch = 80);

}  // namespace qt::winners
