#include "device/emu/jit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "common/error.h"
#include "common/paths.h"
#include "device/jit/source_includes.h"
#include "kernels_src/common/emu_abi.h"

namespace qt::emu {

namespace fs = std::filesystem;

namespace {

// The export trailer: one entry point and one signature query per name expression, the module's binding to
// the executor, and the -fsanitize=thread hooks that route memory accesses to the executor's checks.
constexpr const char* kTrailerHead = R"(
#line 1 "<qtune-emu-trailer>"
#include <cstddef>
#include <type_traits>
#include <utility>
namespace qt_emu_module {
template <class... A>
inline void invoke(void (*f)(A...), void** args) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    f(*static_cast<std::remove_cvref_t<A>*>(args[I])...);
  }(std::index_sequence_for<A...>{});
}
// Runs on the loading thread, outside any fiber: it must not reach the access hooks (no FiberCtx there).
template <class... A>
__attribute__((no_sanitize_thread)) inline uint32_t signature(void (*)(A...), uint32_t* sizes, uint32_t cap) {
  const uint32_t s[] = {static_cast<uint32_t>(sizeof(std::remove_cvref_t<A>))..., 0u};
  for (uint32_t i = 0; i < sizeof...(A) && i < cap; ++i) sizes[i] = s[i];
  return static_cast<uint32_t>(sizeof...(A));
}
__attribute__((always_inline, no_sanitize_thread)) inline void hook(const void* p, uint32_t n, uint32_t flags,
                                                                     const void* ra) {
  const qt::emu::Api* api = qt::emu::g_api;
  if (!api) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a - api->arena_lo < api->arena_span) {
    api->access(qt::emu::ctx(), p, n, flags, ra);
    return;
  }
  qt::emu::FiberCtx* c = qt::emu::ctx();
  if (a - c->smem_lo < c->smem_span) api->access(c, p, n, flags, ra);
}
}  // namespace qt_emu_module
#define QT_EMU_EXPORT extern "C" __attribute__((visibility("default")))
// Entry points called by the loader outside fibers are not instrumented.
#define QT_EMU_EXPORT_HOST extern "C" __attribute__((visibility("default"), no_sanitize_thread))
#define QT_EMU_HOOK extern "C" __attribute__((visibility("hidden"), no_sanitize_thread, noinline))
QT_EMU_EXPORT_HOST uint32_t qt_emu_abi_version() { return qt::emu::kAbiVersion; }
QT_EMU_EXPORT_HOST void qt_emu_bind(const qt::emu::Api* api) { qt::emu::g_api = api; }
QT_EMU_HOOK void __tsan_init() {}
QT_EMU_HOOK void __tsan_func_entry(void*) {}
QT_EMU_HOOK void __tsan_func_exit() {}
QT_EMU_HOOK void __tsan_vptr_update(void**, void*) {}
QT_EMU_HOOK void __tsan_vptr_read(void**) {}
QT_EMU_HOOK void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
QT_EMU_HOOK void __tsan_atomic_signal_fence(int) {}
#define QT_EMU_RW(N)                                                                                        \
  QT_EMU_HOOK void __tsan_read##N(void* p) {                                                                \
    qt_emu_module::hook(p, N, qt::emu::kAccessAligned, __builtin_return_address(0));                        \
  }                                                                                                         \
  QT_EMU_HOOK void __tsan_write##N(void* p) {                                                               \
    qt_emu_module::hook(p, N, qt::emu::kAccessAligned | qt::emu::kAccessWrite, __builtin_return_address(0)); \
  }                                                                                                         \
  QT_EMU_HOOK void __tsan_unaligned_read##N(void* p) { qt_emu_module::hook(p, N, 0, __builtin_return_address(0)); } \
  QT_EMU_HOOK void __tsan_unaligned_write##N(void* p) {                                                     \
    qt_emu_module::hook(p, N, qt::emu::kAccessWrite, __builtin_return_address(0));                          \
  }                                                                                                         \
  QT_EMU_HOOK void __tsan_volatile_read##N(void* p) {                                                       \
    qt_emu_module::hook(p, N, qt::emu::kAccessAligned | qt::emu::kAccessVolatile, __builtin_return_address(0)); \
  }                                                                                                         \
  QT_EMU_HOOK void __tsan_volatile_write##N(void* p) {                                                      \
    qt_emu_module::hook(p, N, qt::emu::kAccessAligned | qt::emu::kAccessWrite | qt::emu::kAccessVolatile,     \
                        __builtin_return_address(0));                                                       \
  }
QT_EMU_RW(1)
QT_EMU_RW(2)
QT_EMU_RW(4)
QT_EMU_RW(8)
QT_EMU_RW(16)
QT_EMU_HOOK void __tsan_read_range(void* p, unsigned long n) {
  qt_emu_module::hook(p, static_cast<uint32_t>(n), 0, __builtin_return_address(0));
}
QT_EMU_HOOK void __tsan_write_range(void* p, unsigned long n) {
  qt_emu_module::hook(p, static_cast<uint32_t>(n), qt::emu::kAccessWrite, __builtin_return_address(0));
}
)";

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h ^= 0xff;  // separator so that ("ab","c") and ("a","bc") differ
  h *= 0x100000001b3ull;
  return h;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command, returning its exit status and combined output.
int run_command(const std::string& cmd, std::string& output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const std::string& compiler_identity(const std::string& cxx) {
  static std::mutex mu;
  static std::string cached_for, id;
  std::lock_guard<std::mutex> lock(mu);
  if (cached_for != cxx || id.empty()) {
    std::string out;
    if (run_command(quote(cxx) + " --version", out) != 0) {
      throw qt::Error("emu: the host compiler '" + cxx + "' does not run (set QTUNE_EMU_CXX): " + out, kExitUnavailable);
    }
    id = out.substr(0, out.find('\n'));
    cached_for = cxx;
  }
  return id;
}

std::string compiler_of(const JitOptions& o) {
  if (!o.compiler.empty()) return o.compiler;
  if (const char* e = std::getenv("QTUNE_EMU_CXX"); e && *e) return e;
  return "g++";
}

std::string truncate_lines(const std::string& s, size_t max_lines) {
  size_t pos = 0;
  for (size_t i = 0; i < max_lines; ++i) {
    pos = s.find('\n', pos);
    if (pos == std::string::npos) return s;
    ++pos;
  }
  return s.substr(0, pos) + "... (output truncated)\n";
}

}  // namespace

std::string default_cache_dir() {
  if (const char* e = std::getenv("QTUNE_EMU_CACHE"); e && *e) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/qtune/emu";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/qtune/emu";
  return (fs::temp_directory_path() / "qtune-emu-cache").string();
}

std::string module_translation_unit(const dev::ModuleSource& src) {
  std::string name = src.name.empty() ? std::string("kernel") : src.name;
  for (char& c : name) {
    if (c == '"' || c == '\\' || c == '\n') c = '_';  // keep the #line directive well-formed
  }
  std::string tu = "#line 1 \"" + name + "\"\n";
  tu += src.source;
  tu += "\n";
  tu += kTrailerHead;
  for (size_t i = 0; i < src.kernels.size(); ++i) {
    std::string expr = src.kernels[i];
    while (!expr.empty() && (expr.front() == '&' || expr.front() == ' ')) expr.erase(expr.begin());
    const std::string n = std::to_string(i);
    tu += "QT_EMU_EXPORT void qt_emu_kernel_" + n + "(void** args) { qt_emu_module::invoke(&" + expr + ", args); }\n";
    tu += "QT_EMU_EXPORT_HOST uint32_t qt_emu_kernel_" + n + "_sig(uint32_t* s, uint32_t cap) { return " +
          "qt_emu_module::signature(&" + expr + ", s, cap); }\n";
  }
  return tu;
}

JitResult jit_compile(const dev::ModuleSource& src, const JitOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  if (src.kernels.empty()) throw qt::Error("emu: module " + src.name + " names no kernels to instantiate", kExitBadInput);
  const std::string cxx = compiler_of(opts);
  const std::string root = qt::source_root();

  std::vector<std::string> flags = {"-std=c++20", opts.opt_level, "-g1", "-fPIC", "-fno-strict-aliasing",
                                    "-fstack-clash-protection",
                                    "-Wno-unknown-pragmas", "-DQT_EMU=1", "-DQT_ARCH=" + std::to_string(opts.arch)};
  // fp32 a*b+c as the GPU computes it: NVRTC (--fmad=true) and ptxas fuse a product into an add or subtract
  // when that is its only use (FFMA) and keep a product used elsewhere rounded; g++'s contraction makes the
  // same choice (kernels_src/common/README.md, "Where the emulator differs from a GPU"). At -O1 it needs
  // -fexpensive-optimizations, and the host needs FMA instructions.
  if (__builtin_cpu_supports("fma")) {
    for (const char* f : {"-ffp-contract=fast", "-fexpensive-optimizations", "-mfma"}) flags.push_back(f);
  }
  if (opts.instrument) {
    flags.push_back("-fsanitize=thread");
    flags.push_back("--param=tsan-instrument-func-entry-exit=0");
    // Volatile accesses get their own hooks: they are strong (spin-wait flags), not data races.
    flags.push_back("--param=tsan-distinguish-volatile=1");
    // Keep aggregate loads whole: split into scalars, a misaligned float4/uint4 access would look aligned.
    flags.push_back("-fno-tree-sra");
  }
  for (const auto& [k, v] : src.defines) flags.push_back("-D" + k + (v.empty() ? "" : "=" + v));
  std::vector<std::string> search_dirs = {root};
  for (const std::string& d : src.include_dirs) {
    flags.push_back("-I" + d);
    search_dirs.push_back(d);
  }
  flags.push_back("-I" + root);

  const std::string tu = module_translation_unit(src);

  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  auto mix = [&](const std::string& s) {
    h1 = fnv1a(h1, s);
    h2 = fnv1a(h2 ^ 0x5bd1e995u, s);
  };
  mix("abi " + std::to_string(kAbiVersion));
  mix(compiler_identity(cxx));
  for (const std::string& f : flags) mix(f);
  mix(tu);
  // The headers the module reaches, so that editing any of them recompiles it.
  for (const compile::IncludedFile& h : compile::quoted_includes(src.source, "", search_dirs)) {
    mix(h.path + "\n" + h.text);
  }
  char key[40];
  std::snprintf(key, sizeof key, "%016llx%016llx", static_cast<unsigned long long>(h1), static_cast<unsigned long long>(h2));

  JitResult res;
  res.key = key;
  const fs::path dir = opts.cache_dir.empty() ? fs::path(default_cache_dir()) : fs::path(opts.cache_dir);
  const fs::path so = dir / (std::string(key) + ".so");
  res.so_path = so.string();
  std::error_code ec;
  if (fs::is_regular_file(so, ec)) {
    res.cache_hit = true;
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  }
  fs::create_directories(dir, ec);
  if (ec) throw qt::Error("emu: cannot create the JIT cache directory " + dir.string() + ": " + ec.message(), kExitFailure);
  // One compile per key at a time across processes (parallel test runs load the same modules): the others
  // wait on the lock and then find the finished module.
  const std::string lock_path = (dir / (std::string(key) + ".lock")).string();
  const int lock_fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  struct LockGuard {
    int fd;
    ~LockGuard() {
      if (fd >= 0) {
        ::flock(fd, LOCK_UN);
        ::close(fd);
      }
    }
  } guard{lock_fd};
  if (lock_fd >= 0) ::flock(lock_fd, LOCK_EX);
  if (fs::is_regular_file(so, ec)) {
    res.cache_hit = true;
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  }

  static std::atomic<uint64_t> counter{0};
  const std::string tmp = (dir / (std::string(key) + ".tmp" + std::to_string(::getpid()) + "_" +
                                  std::to_string(counter.fetch_add(1))))
                              .string();
  const std::string cpp = tmp + ".cpp", obj = tmp + ".o", out = tmp + ".so";
  {
    std::ofstream f(cpp, std::ios::binary);
    f << tu;
    if (!f) throw qt::Error("emu: cannot write " + cpp, kExitFailure);
  }
  std::string cmd = quote(cxx);
  for (const std::string& f : flags) cmd += " " + quote(f);
  cmd += " -c " + quote(cpp) + " -o " + quote(obj);
  std::string log;
  const int rc = run_command(cmd, log);
  if (rc != 0) {
    fs::remove(cpp, ec);
    fs::remove(obj, ec);
    throw qt::Error("emu: compiling kernel module '" + src.name + "' failed:\n" + truncate_lines(log, 60), kExitBadInput);
  }
  // Linked without -fsanitize=thread: the hooks above replace the TSan runtime.
  std::string link_log;
  const std::string link = quote(cxx) + " -shared -o " + quote(out) + " " + quote(obj) + " -Wl,-z,defs";
  if (run_command(link, link_log) != 0) {
    fs::remove(cpp, ec);
    fs::remove(obj, ec);
    throw qt::Error("emu: linking kernel module '" + src.name + "' failed:\n" + truncate_lines(link_log, 40), kExitFailure);
  }
  fs::remove(obj, ec);
  fs::rename(cpp, dir / (std::string(key) + ".cpp"), ec);
  fs::rename(out, so, ec);
  if (ec) throw qt::Error("emu: cannot store " + so.string() + ": " + ec.message(), kExitFailure);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace qt::emu
