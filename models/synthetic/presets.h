#pragma once
// Named model shapes for synthetic checkpoints: the real Qwen3 shapes (weights random) and small ones for
// tests and the default model.
#include <string>
#include <vector>

#include "models/core/model_config.h"

namespace qt::synthetic {

// Throws qt::Error listing the known names if `name` is unknown. group_size is left 0 (format default).
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace qt::synthetic
