#include "device/blas/blas_lt.h"

#include <dlfcn.h>
#include <cublasLt.h>

#include <cstdlib>
#include <type_traits>

#include "common/error.h"
#include "device/cuda/cuda_device.h"
#include "kernels_src/registry/registry.h"

namespace qt::blas {
namespace {

// The entry points used, resolved from the library by name (only the toolkit headers' types are used).
struct LtApi {
  std::string unavailable_reason;
  size_t version = 0;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmulAlgoConfigGetAttribute) algo_get = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

LtApi load_lt() {
  LtApi api;
  const char* override_path = std::getenv("QTUNE_LIBCUBLASLT");
  const char* candidates[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  void* lib = nullptr;
  std::string tried;
  if (override_path && *override_path) {
    lib = dlopen(override_path, RTLD_NOW | RTLD_LOCAL);
    tried = override_path;
  } else {
    for (const char* c : candidates) {
      lib = dlopen(c, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
      tried += std::string(tried.empty() ? "" : ", ") + c;
    }
    // The toolkit's own copy, for machines where it is not on the loader's path.
    if (!lib) lib = dlopen("/usr/local/cuda/lib64/libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) {
    const char* err = dlerror();
    api.unavailable_reason = "no cuBLASLt: cannot load " + tried + " (" + (err ? err : "dlopen failed") + ")";
    return api;
  }
  std::string missing;
  auto resolve = [&](const char* name, auto& fn) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  resolve("cublasLtCreate", api.create);
  resolve("cublasLtDestroy", api.destroy);
  resolve("cublasLtGetVersion", api.get_version);
  resolve("cublasLtGetStatusName", api.status_name);
  resolve("cublasLtMatmulDescCreate", api.desc_create);
  resolve("cublasLtMatmulDescDestroy", api.desc_destroy);
  resolve("cublasLtMatmulDescSetAttribute", api.desc_set);
  resolve("cublasLtMatrixLayoutCreate", api.layout_create);
  resolve("cublasLtMatrixLayoutDestroy", api.layout_destroy);
  resolve("cublasLtMatmulPreferenceCreate", api.pref_create);
  resolve("cublasLtMatmulPreferenceDestroy", api.pref_destroy);
  resolve("cublasLtMatmulPreferenceSetAttribute", api.pref_set);
  resolve("cublasLtMatmulAlgoGetHeuristic", api.heuristic);
  resolve("cublasLtMatmulAlgoConfigGetAttribute", api.algo_get);
  resolve("cublasLtMatmul", api.matmul);
  if (!missing.empty()) {
    api.unavailable_reason = "the loaded cuBLASLt does not provide " + missing;
    return api;
  }
  api.version = api.get_version();
  return api;  // the library stays loaded for the life of the process
}

const LtApi& lt() {
  static const LtApi api = load_lt();
  return api;
}

void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const char* name = lt().status_name ? lt().status_name(s) : nullptr;
  throw Error(std::string(what) + ": " + (name ? name : "cublasStatus " + std::to_string(int(s))), kExitFailure);
}

}  // namespace

const Baseline* find_baseline(std::string_view store_name) {
  for (const Baseline& b : kBaselines)
    if (store_name == b.store_name) return &b;
  return nullptr;
}

const Baseline* baseline_for(WeightType t, const std::string& op) {
  for (const Baseline& b : kBaselines)
    if (b.weight_type == t && kernels::find_family(b.problem_family).op == op) return &b;
  return nullptr;
}

std::string blas_lt_unavailable_reason() { return lt().unavailable_reason; }
size_t blas_lt_version() { return lt().unavailable_reason.empty() ? lt().version : 0; }

// Descriptors and the chosen algorithm of one problem, made once.
struct BlasLt::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulHeuristicResult_t ranked[BlasLt::kMaxRanks]{};
  int found = 0;
  ~Plan() {
    if (a) lt().layout_destroy(a);
    if (b) lt().layout_destroy(b);
    if (c) lt().layout_destroy(c);
    if (desc) lt().desc_destroy(desc);
  }
};

BlasLt::BlasLt(dev::Device& device, size_t workspace_bytes) : device_(device) {
  auto* cuda = dynamic_cast<cuda::CudaDevice*>(&device);
  if (!cuda) throw Error("cuBLASLt runs on a CUDA GPU only, not on " + device.name(), kExitUnavailable);
  if (!lt().unavailable_reason.empty()) throw Error(lt().unavailable_reason, kExitUnavailable);
  cuda->make_current();
  cublasLtHandle_t h = nullptr;
  check(lt().create(&h), "cublasLtCreate");
  handle_ = h;
  workspace_ = dev::Buffer(device, workspace_bytes);
}

BlasLt::~BlasLt() {
  plans_.clear();
  if (handle_) lt().destroy(static_cast<cublasLtHandle_t>(handle_));
}

// Column-major view of the row-major problem: y^T [N][M] = op(W) [N][K] * x^T [K][M]. Row-major W[N][K] is
// column-major K x N (ld K), used transposed; row-major W[K][N] is column-major N x K (ld N), used as is.
BlasLt::Plan& BlasLt::plan(WeightLayout layout, int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0)
    throw Error("cuBLASLt GEMM: sizes must be positive (M=" + std::to_string(m) + ", N=" + std::to_string(n) +
                ", K=" + std::to_string(k) + ")");
  auto key = std::make_tuple(int(layout), m, n, k);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  check(lt().desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = layout == WeightLayout::NK ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = CUBLAS_OP_N;
  check(lt().desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "CUBLASLT_MATMUL_DESC_TRANSA");
  check(lt().desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "CUBLASLT_MATMUL_DESC_TRANSB");
  if (layout == WeightLayout::NK)
    check(lt().layout_create(&p->a, CUDA_R_16F, uint64_t(k), uint64_t(n), k), "cublasLtMatrixLayoutCreate(W)");
  else
    check(lt().layout_create(&p->a, CUDA_R_16F, uint64_t(n), uint64_t(k), n), "cublasLtMatrixLayoutCreate(W)");
  check(lt().layout_create(&p->b, CUDA_R_16F, uint64_t(k), uint64_t(m), k), "cublasLtMatrixLayoutCreate(x)");
  check(lt().layout_create(&p->c, CUDA_R_16F, uint64_t(n), uint64_t(m), n), "cublasLtMatrixLayoutCreate(y)");
  cublasLtMatmulPreference_t pref = nullptr;
  check(lt().pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = workspace_.bytes();
  cublasStatus_t s = lt().pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (s == CUBLAS_STATUS_SUCCESS) s = lt().heuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a, p->b,
                                                     p->c, p->c, pref, kMaxRanks, p->ranked, &p->found);
  lt().pref_destroy(pref);
  check(s, "cublasLtMatmulAlgoGetHeuristic");
  if (p->found == 0)
    throw Error("cuBLASLt has no algorithm for the fp16 GEMM M=" + std::to_string(m) + " N=" + std::to_string(n) +
                    " K=" + std::to_string(k),
                kExitFailure);
  return *plans_.emplace(key, std::move(p)).first->second;
}

void BlasLt::prepare(WeightLayout layout, int64_t m, int64_t n, int64_t k) { plan(layout, m, n, k); }

int BlasLt::algorithms(WeightLayout layout, int64_t m, int64_t n, int64_t k) { return plan(layout, m, n, k).found; }

namespace {
const cublasLtMatmulHeuristicResult_t& ranked_algo(const cublasLtMatmulHeuristicResult_t* ranked, int found, int rank) {
  if (rank < 0 || rank >= found)
    throw Error("cuBLASLt offers " + std::to_string(found) + " algorithms for this GEMM, not rank " + std::to_string(rank),
                kExitFailure);
  return ranked[rank];
}
}  // namespace

void BlasLt::gemm_f16(dev::DevPtr w, WeightLayout layout, dev::DevPtr x, dev::DevPtr y, int64_t m, int64_t n,
                      int64_t k, int rank) {
  Plan& p = plan(layout, m, n, k);
  const cublasLtMatmulHeuristicResult_t& algo = ranked_algo(p.ranked, p.found, rank);
  auto& cuda = static_cast<cuda::CudaDevice&>(device_);
  cuda.make_current();
  const float alpha = 1.0f, beta = 0.0f;
  const void* wp = reinterpret_cast<const void*>(w.addr);
  const void* xp = reinterpret_cast<const void*>(x.addr);
  void* yp = reinterpret_cast<void*>(y.addr);
  check(lt().matmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, wp, p.a, xp, p.b, &beta, yp, p.c, yp,
                    p.c, &algo.algo, reinterpret_cast<void*>(workspace_.ptr().addr), workspace_.bytes(),
                    static_cast<cudaStream_t>(cuda.stream())),
        "cublasLtMatmul");
}

std::string BlasLt::describe(WeightLayout layout, int64_t m, int64_t n, int64_t k, int rank) {
  Plan& p = plan(layout, m, n, k);
  const cublasLtMatmulHeuristicResult_t& best = ranked_algo(p.ranked, p.found, rank);
  int id = -1, tile = -1, stages = -1;
  size_t written = 0;
  lt().algo_get(&best.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &written);
  lt().algo_get(&best.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &written);
  lt().algo_get(&best.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &written);
  const size_t v = lt().version;
  return "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
         " algo " + std::to_string(id) + " tile " + std::to_string(tile) + " stages " + std::to_string(stages) +
         " (" + std::to_string(best.workspaceSize) + " B workspace, " + std::to_string(best.wavesCount) + " waves)";
}

}  // namespace qt::blas
