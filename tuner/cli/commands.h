#pragma once
#include <string>
#include <vector>

namespace qt::tune {
int replay_command(const std::vector<std::string>& args);  // qtune replay ...
int store_command(const std::vector<std::string>& args);   // qtune store ...
int tune_command(const std::vector<std::string>& args);    // qtune [--device D] --model X.bin | --gpu smXX
int static_command(const std::vector<std::string>& args);
int profile_command(const std::vector<std::string>& args);  // qtune profile --device emu --family F ...  // qtune static ... (the nvrtc engineer's)
}  // namespace qt::tune
