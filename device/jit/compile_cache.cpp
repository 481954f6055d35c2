#include "device/jit/compile_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/sha256.h"

namespace qt::compile {
namespace fs = std::filesystem;

std::string default_cache_dir() {
  if (const char* v = std::getenv("QTUNE_CACHE_DIR"); v && *v) return v;
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) return std::string(v) + "/qtune/nvrtc";
  if (const char* v = std::getenv("HOME"); v && *v) return std::string(v) + "/.cache/qtune/nvrtc";
  return (fs::temp_directory_path() / "qtune-nvrtc-cache").string();
}

std::string cache_key(const CompileRequest& req) {
  Sha256 h;
  h.field("qtune-nvrtc-cache-v1");
  h.field(nvrtc_version());
  h.field(cuda_include_dir());
  h.field(nvrtc_target(req.sm));
  h.field(req.source);
  for (const auto& [path, text] : local_includes(req.source)) h.field(path).field(text);
  for (const auto& o : req.options) h.field(o);
  h.field("|names|");
  for (const auto& e : req.name_expressions) h.field(e);
  return h.hex();
}

CompileCache::CompileCache(std::string dir) : dir_(std::move(dir)) {}

std::optional<CompileOutput> CompileCache::load(const std::string& key) const {
  const fs::path meta_path = fs::path(dir_) / (key + ".json");
  const fs::path cubin_path = fs::path(dir_) / (key + ".cubin");
  std::ifstream meta_in(meta_path), cubin_in(cubin_path, std::ios::binary);
  if (!meta_in || !cubin_in) return std::nullopt;
  try {
    const nlohmann::json meta = nlohmann::json::parse(meta_in);
    CompileOutput out;
    out.cubin.assign(std::istreambuf_iterator<char>(cubin_in), std::istreambuf_iterator<char>());
    const std::string digest =
        Sha256().update(out.cubin.data(), out.cubin.size()).hex();
    if (digest != meta.at("cubin_sha256").get<std::string>()) return std::nullopt;
    out.lowered_names = meta.at("lowered_names").get<std::map<std::string, std::string>>();
    out.resources = meta.at("resources").get<std::vector<KernelResources>>();
    out.log = meta.at("log").get<std::string>();
    out.seconds = meta.at("compile_seconds").get<double>();
    // An entry that lacks a kernel's resources (written by an older qtune, whose compile did not check) would
    // fail every point with that kernel: a miss instead, recompiled and overwritten.
    if (!unreported_kernels(out).empty()) return std::nullopt;
    // Likewise an entry written before the PTX's main loop was read: its kernels would lose their issue time.
    for (const nlohmann::json& r : meta.at("resources"))
      if (!r.contains("loop_instructions")) return std::nullopt;
    return out;
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged entry is recompiled and overwritten
  }
}

void CompileCache::store(const std::string& key, const CompileOutput& out) const {
  if (const std::string missing = unreported_kernels(out); !missing.empty())
    throw Error("not caching a compile without ptxas resources for " + missing, kExitFailure);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error("cannot create the compile cache directory " + dir_ + ": " + ec.message(), kExitFailure);
  nlohmann::json meta = {{"cubin_sha256", Sha256().update(out.cubin.data(), out.cubin.size()).hex()},
                         {"lowered_names", out.lowered_names},
                         {"resources", out.resources},
                         {"log", out.log},
                         {"compile_seconds", out.seconds},
                         {"nvrtc_version", nvrtc_version()}};
  static std::atomic<uint64_t> counter{0};
  const std::string tmp_suffix = ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  auto write = [&](const std::string& name, const std::string& bytes) {
    const fs::path final_path = fs::path(dir_) / name;
    const fs::path tmp = fs::path(dir_) / (name + tmp_suffix);
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!f) throw Error("cannot write " + tmp.string(), kExitFailure);
    }
    fs::rename(tmp, final_path, ec);
    if (ec) throw Error("cannot rename " + tmp.string() + ": " + ec.message(), kExitFailure);
  };
  // The CUBIN first: a reader only trusts an entry whose .json exists and matches the CUBIN's digest.
  write(key + ".cubin", std::string(out.cubin.begin(), out.cubin.end()));
  write(key + ".json", meta.dump());
}

}  // namespace qt::compile
