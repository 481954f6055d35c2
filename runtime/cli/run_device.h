#pragma once
// The backend qrun and qbench run a model on: the CPU backend, or the device backend on the emulator or a
// CUDA GPU (the driver loaded on demand: without one, --device cuda exits 3 with the reason).
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "device/api/device.h"
#include "runtime/cli/decode_choice.h"
#include "runtime/cli/decode_trial.h"
#include "runtime/core/backend.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/gpu/device_backend.h"

namespace qt::rt {

struct RunDeviceOptions {
  std::string device = "cpu";  // cpu, emu, cuda
  CpuOptions cpu;
  std::string tuned_cache;     // "" = none; emu/cuda read their own winners from it
  bool graphs = true;
  bool time_launches = false;  // emu/cuda: every launch timed between events, no graphs (qrun --launch-times)
  // cuda: programmatic dependent launch (sm_90+, CudaDevice::set_programmatic_launch); a GPU that cannot is an
  // error naming why. Ignored on the emulator, which runs one launch at a time.
  bool programmatic_launch = false;
  bool fuse_norm = false;  // emu/cuda: decode steps' RMSNorms fused into the GEMVs beside them (DeviceBackendOptions)
  // emu/cuda with a tuned cache: the model whose decode ranking in it (decode_choice.h, qbench --choose-decode)
  // sets fuse_norm and programmatic_launch, to the fastest variant this run can use. Unset: no lookup (qrun
  // leaves it unset when --decode, --fuse-norm or --pdl names a variant, or --no-stored-decode ignores the store).
  std::optional<DecodeStepKey> stored_decode;
  // emu/cuda: where no stored ranking chose the decode variant, time plain against the most fused variant this
  // run can use on its first decode steps and go on with the faster (DecodeTrial, trial_candidates).
  bool decode_trial = false;
  bool trtllm_int8 = false;  // INT8 MoE experts in TensorRT-LLM's layout on the device
  bool predequantize = false;  // dense linear weights as fp16 on the device, GEMMs on cuBLASLt where it wins
  bool prefill_f16 = false;  // dense projections quantized and an fp16 copy beside (DeviceBackendOptions::prefill_f16)
  bool frag_layout = true;   // dense AWQ / INT8_GW_SYM projections in the frag layout (DeviceBackendOptions)
  std::optional<bool> frag_experts;  // MoE experts in the frag layout, grouped GEMMs on wgmma; unset: the device's default
  int emu_threads = 0;
  int emu_arch = 80;  // QT_ARCH the emulator presents (90: the sm_90a families run)
  bool emu_checks = true;      // the emulator's race/bounds instrumentation
};

struct RunDevice {
  std::unique_ptr<dev::Device> device;     // null on the CPU
  std::unique_ptr<Backend> backend;
  DeviceBackend* device_backend = nullptr;  // the backend, when it is the device one
  std::string decode_line;  // the stored decode variant the run took (StoredDecodeChoice::line), else ""
  // The trial of the decode variants (RunDeviceOptions::decode_trial), else null: feed it every decode step's
  // seconds (decode_step_observer).
  std::unique_ptr<DecodeTrial> trial;
  std::string trial_note;  // why the trial runs without PDL on a GPU whose architecture has it
  std::function<void(double)> decode_step_observer() const;
};

// Throws qt::Error: an unknown device name (exit 1), a device that cannot be used here (exit 3).
RunDevice make_run_device(const RunDeviceOptions& options);

// One line for qrun's statistics: the kernel choices (tuned / nearest / default) and graph replays.
std::string device_report(const RunDevice& d);

}  // namespace qt::rt
