#pragma once
// The qconvert subcommands; each parses its own arguments (argv after the subcommand name) and returns
// the process exit code, throwing qt::Error for bad input.
#include <cstdint>
#include <string>
#include <vector>

namespace qt::cli {

int cmd_convert(const std::vector<std::string>& args);
int cmd_info(const std::vector<std::string>& args);
int cmd_synthetic(const std::vector<std::string>& args);

// "5GB", "500MB", "64MiB", "1048576" -> bytes (qt::Error naming `what` otherwise).
uint64_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace qt::cli
