#include "device/api/device.h"

#include <cstdio>

#include "common/error.h"

namespace qt::dev {

void Buffer::release_quietly() noexcept {
  try {
    reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "device buffer of %zu bytes leaked: %s\n", bytes_, e.what());
  }
}

void Buffer::check_size(size_t n) const {
  if (!dev_) throw qt::Error("device buffer: use of an empty buffer", kExitFailure);
  if (n > bytes_) {
    throw qt::Error("device buffer: transfer of " + std::to_string(n) + " bytes exceeds the buffer's " +
                        std::to_string(bytes_) + " bytes",
                    kExitFailure);
  }
}

void Buffer::check_count(size_t count, size_t elem_bytes) const {
  if (!dev_) throw qt::Error("device buffer: use of an empty buffer", kExitFailure);
  if (count > bytes_ / elem_bytes) {
    throw qt::Error("device buffer: transfer of " + std::to_string(count) + " elements of " +
                        std::to_string(elem_bytes) + " bytes exceeds the buffer's " + std::to_string(bytes_) + " bytes",
                    kExitFailure);
  }
}

std::string to_string(const Dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

void validate_launch(const LaunchConfig& cfg, std::string_view kernel_name) {
  const std::string k(kernel_name);
  auto bad = [&](const std::string& what) { throw qt::Error("launch of " + k + ": " + what, kExitFailure); };
  if (cfg.grid.count() == 0) bad("empty grid " + to_string(cfg.grid));
  if (cfg.block.count() == 0) bad("empty block " + to_string(cfg.block));
  if (cfg.block.count() > 1024) bad("block " + to_string(cfg.block) + " has more than 1024 threads");
  if (cfg.block.z > 64) bad("block.z " + std::to_string(cfg.block.z) + " exceeds 64");
  if (cfg.grid.y > 65535 || cfg.grid.z > 65535) bad("grid " + to_string(cfg.grid) + " exceeds 65535 in y or z");
  const Dim3& c = cfg.cluster;
  if (c.count() == 0 || c.count() > kMaxClusterSize)
    bad("cluster " + to_string(c) + ": a cluster holds 1 to " + std::to_string(kMaxClusterSize) + " CTAs");
  if (cfg.grid.x % c.x || cfg.grid.y % c.y || cfg.grid.z % c.z)
    bad("cluster " + to_string(c) + " does not divide the grid " + to_string(cfg.grid));
  if (cfg.dynamic_smem_bytes > 227 * 1024) {
    bad("dynamic shared memory of " + std::to_string(cfg.dynamic_smem_bytes) + " bytes exceeds 227 KiB");
  }
}

}  // namespace qt::dev
