#include "runtime/cli/run_device.h"

#include <cstdio>

#include "common/error.h"
#include "device/blas/blas_lt.h"
#include "device/cuda/cuda_device.h"
#include "device/emu/emu_device.h"
#include "device/winners/winners.h"

namespace qt::rt {

RunDevice make_run_device(const RunDeviceOptions& o) {
  RunDevice d;
  if (o.device == "cpu") {
    d.backend = std::make_unique<CpuBackend>(o.cpu);
    return d;
  }
  DeviceBackendOptions opts;
  opts.graphs = o.graphs;
  opts.time_launches = o.time_launches;
  opts.trtllm_int8 = o.trtllm_int8;
  opts.frag_layout = o.frag_layout;
  opts.frag_experts = o.frag_experts;
  opts.fuse_norm = o.fuse_norm;
  opts.predequantize = o.predequantize;
  opts.prefill_f16 = o.prefill_f16;
  bool pdl = o.programmatic_launch;
  cuda::CudaDevice* gpu = nullptr;
  if (o.device == "emu") {
    // Each emulator thread maps its shared-memory window with guard pages (thousands of mappings): past 8 threads
    // a default vm.max_map_count runs out, and the emulator gains nothing on a 2-core CI machine anyway.
    if (o.emu_threads > 8)
      throw Error("--threads " + std::to_string(o.emu_threads) + ": the emulator runs at most 8 host threads");
    emu::EmuOptions eo;
    eo.threads = uint32_t(o.emu_threads);
    eo.checks = o.emu_checks;
    eo.arch = o.emu_arch;
    d.device = std::make_unique<emu::EmuDevice>(eo);
    opts.store_prefix = "emu.";
  } else if (o.device == "cuda") {
    auto g = std::make_unique<cuda::CudaDevice>();  // throws with exit code 3 and the reason when unusable
    gpu = g.get();
    d.device = std::move(g);
    opts.store_prefix = "cuda.";
  } else {
    throw Error("--device: unknown device '" + o.device + "' (cpu, emu, cuda)");
  }
  if (!o.tuned_cache.empty()) {
    opts.tuned = std::make_shared<winners::WinnersTable>(o.tuned_cache);
    // Winners of this GPU model under other software, or none for this device: one line saying so.
    const winners::DeviceFingerprint fp = d.device->store_fingerprint();
    const std::string line = winners::match_line(opts.tuned->match(fp), fp, o.tuned_cache);
    if (!line.empty()) std::fprintf(stderr, "qrun: %s\n", line.c_str());
    if (o.stored_decode) {
      // Fused norms need the frag layout's GEMVs; this run may have asked for another layout.
      std::vector<DecodeVariant> runnable;
      for (const DecodeVariant& v : decode_variants(o.device, d.device->arch()))
        if (!v.fuse_norm || (o.frag_layout && !o.predequantize)) runnable.push_back(v);
      if (auto choice = stored_decode_choice(*opts.tuned, fp, opts.store_prefix, *o.stored_decode, runnable)) {
        opts.fuse_norm = choice->variant.fuse_norm;
        pdl = choice->variant.pdl;
        d.decode_line = choice->line;
      }
    }
  }
  std::string why;
  if (pdl && gpu && !gpu->set_programmatic_launch(true, &why)) {
    if (o.programmatic_launch) throw Error("programmatic dependent launch (--pdl, or --decode with +pdl): " + why, kExitUnavailable);
    // The store's choice on a driver that refuses it now: the rest of the choice still holds.
    d.decode_line += " (without PDL here: " + why + ")";
  }
  // cuBLASLt on every GPU run: fp16 weights (the lm_head of a quantized model, every layer of a predequantized
  // one) take it above the GEMVs' rows by default, and a tuned dispatch may rank it first anywhere.
  if (o.device == "cuda") {
    try {
      opts.blas = std::make_shared<blas::BlasLt>(*d.device);
    } catch (const Error& e) {
      std::fprintf(stderr, "qrun: no cuBLASLt (%s): our kernel families run every GEMM\n", e.what());
    }
  }
  auto backend = std::make_unique<DeviceBackend>(*d.device, std::move(opts));
  d.device_backend = backend.get();
  d.backend = std::move(backend);
  if (o.decode_trial && d.decode_line.empty()) {
    // Fused norms need the frag layout's GEMVs (as a stored choice does above).
    // PDL where the GPU takes it: asked once here, and left off until a candidate with it runs.
    bool pdl_ok = false;
    if (gpu && d.device->arch() >= 90) {
      std::string refused;
      pdl_ok = gpu->set_programmatic_launch(true, &refused);
      gpu->set_programmatic_launch(false);
      if (!pdl_ok) d.trial_note = " (no PDL here: " + refused + ")";
    }
    const std::vector<DecodeVariant> candidates = trial_candidates(pdl_ok, o.frag_layout && !o.predequantize);
    if (candidates.size() >= 2) {
      DeviceBackend* be = d.device_backend;
      d.trial = std::make_unique<DecodeTrial>(candidates, [be, gpu](const DecodeVariant& v) -> std::string {
        std::string refused;
        if (gpu && !gpu->set_programmatic_launch(v.pdl, &refused) && v.pdl) return refused;
        if (!gpu && v.pdl) return "programmatic dependent launch needs a CUDA GPU";
        be->set_fuse_norm(v.fuse_norm);
        return "";
      });
    }
  }
  return d;
}

std::function<void(double)> RunDevice::decode_step_observer() const {
  if (!trial) return {};
  DecodeTrial* t = trial.get();
  return [t](double seconds) { t->step_done(seconds); };
}

std::string device_report(const RunDevice& d) {
  if (!d.device_backend) return "";
  const LaunchQueue::Stats& s = d.device_backend->launch_stats();
  const DeviceBackend::BlasCounts& b = d.device_backend->blas_counts();
  const std::string fp16 = (b.blas + b.families == 0 ? "" :
      " | fp16 linears: " + std::to_string(b.blas) + " on cuBLASLt, " + std::to_string(b.families) + " on our kernels") +
      (d.device_backend->options().prefill_f16 ? " | prefill on the fp16 copy: " + std::to_string(b.f16_copy) + " linears" : "");
  const DeviceBackend::GroupCounts& g = d.device_backend->group_counts();
  // The trial's steps of fused norms count even where it settled on plain.
  const bool any_fused = g.norm_fused + g.residual_fused + g.moe_residual > 0;
  const std::string fused = !d.device_backend->options().fuse_norm && !(d.trial && any_fused) ? ""
                            : " | fused norms: " + std::to_string(g.norm_fused) + " normalizing and " +
                                  std::to_string(g.residual_fused) + " residual GEMV calls" +
                                  (g.norm_fused + g.residual_fused == 0 ? " (they need q|k|v stored concatenated in the frag layout)" : "") +
                                  ", " + std::to_string(g.rope_fused) + " attentions with their RoPE" +
                                  (g.moe_residual ? ", " + std::to_string(g.moe_residual) + " MoE blocks adding to it (" +
                                                        std::to_string(g.moe_stream) + " as the two routed GEMVs, " +
                                                        std::to_string(g.residual_norm) + " normalized by o_proj)"
                                                  : "");
  const auto* gpu = dynamic_cast<const cuda::CudaDevice*>(d.device.get());
  const std::string pdl = gpu && gpu->programmatic_launch() ? " | programmatic dependent launch" : "";
  return d.device->name() + pdl + ": kernels for " + d.device_backend->chooser().summary() + fp16 + fused + " | " +
         std::to_string(s.launches) + " launches, " + std::to_string(s.replays) + " steps replayed from " +
         std::to_string(s.captures) + " captured graph" + (s.captures == 1 ? "" : "s") +
         (d.decode_line.empty() ? "" : " | " + d.decode_line) + (d.trial ? " | " + d.trial->line() + d.trial_note : "");
}

}  // namespace qt::rt
