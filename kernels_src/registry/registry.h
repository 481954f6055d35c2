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
// Adds a family defined outside kernels_src (a test's scripted family). A tuner worker is a program of its
// own, so a test that tunes such a family registers it in its worker too (tests/worker_entry.h). A name
// already known is replaced.
void add_family(const KernelFamily* family);
// The weight layout an op reads, from its name: "frag" for linear.frag and dequant.frag, "trtllm" for the
// moe_*.trtllm ops, "file" (the model file's own) for every other.
std::string op_weight_layout(const std::string& op);
// The layout the device runtime loads a weight of type `t` in, by default, for work like `op`'s: dense
// projections (linear, gate_up_swiglu, dequant, each in either layout's op) of the types the frag layout holds go to it; the lm_head and
// the router (`head`; runtime/gpu/device_backend.cpp loads them so), experts and every other weight keep the
// file's layout.
std::string default_weight_layout(const std::string& op, WeightType t, bool head = false);
// Whether a model shape's label (models/core/linear_shapes.h: "wq+wo", "lm_head"; tensors sharing a shape are
// joined by '+') names a head (lm_head, router), with `head`, or another weight, without.
bool names_head(const std::string& label, bool head);
// Whether the device runtime dispatches through `f` when it loads a model's weights in their default layouts:
// an op it runs, on a weight type in the layout the family reads, for some weight (a head or a projection).
// Load-time families (repack) never are. The Hopper grouped MoE GEMMs (ops moe_*.frag) count as dispatched:
// the runtime runs them on request (--expert-layout frag), and the tuner is to measure them.
bool dispatched_by_default(const KernelFamily& f);
// The same for the weights of one model shape (its label): the Q8_0 frag families serve a Q8_0 model's
// projections, the file-layout Q8_0 families its lm_head.
bool dispatched_by_default(const KernelFamily& f, const Shape& s);

// The family's source file read from <source root>/kernels_src/<family.source>.
std::string read_family_source(const KernelFamily& f);

}  // namespace qt::kernels
