#include "runtime/cpu/amx_tile_model.h"

#include <atomic>
#include <cstring>
#include <string>

#include "common/error.h"

namespace qt::rt {
namespace {

std::atomic<uint64_t> g_products{0};

[[noreturn]] void fault(const std::string& what) { throw Error("AMX tile model: " + what); }

uint32_t dword(const uint8_t* row, int n) {
  uint32_t v;
  std::memcpy(&v, row + 4 * n, 4);
  return v;
}

}  // namespace

uint64_t AmxTileModel::products_run() { return g_products.load(); }

AmxTileModel& AmxTileModel::this_thread() {
  thread_local AmxTileModel model;
  return model;
}

// LDTILECFG: palette 0 is the init state; palette 1 checks every shape against its limits (#GP), and the
// tiles start zeroed.
void AmxTileModel::configure(const TileConfig& cfg) {
  if (cfg.palette == 0) return release();
  if (cfg.palette != 1) fault("palette " + std::to_string(cfg.palette) + " does not exist (#GP)");
  for (uint8_t b : cfg.reserved)
    if (b != 0) fault("reserved configuration bytes are not zero (#GP)");
  for (int t = 0; t < 16; ++t) {
    const int rows = cfg.rows[t], colsb = cfg.colsb[t];
    if (t >= kTileCount) {
      if (rows != 0 || colsb != 0) fault("tile " + std::to_string(t) + " does not exist in palette 1 (#GP)");
      continue;
    }
    if (rows > kTileMaxRows || colsb > kTileMaxColsb)
      fault("tile " + std::to_string(t) + " is " + std::to_string(rows) + " x " + std::to_string(colsb) +
            " bytes, over 16 x 64 (#GP)");
    // Stricter than the SDM may be (the kernel never configures such a tile): a shape needs both.
    if ((rows == 0) != (colsb == 0)) fault("tile " + std::to_string(t) + " has rows or columns but not both (#GP)");
  }
  palette_ = 1;
  for (int t = 0; t < kTileCount; ++t) rows_[t] = cfg.rows[t], colsb_[t] = cfg.colsb[t];
  std::memset(data_, 0, sizeof(data_));
}

void AmxTileModel::release() {
  palette_ = 0;
  for (int t = 0; t < kTileCount; ++t) rows_[t] = colsb_[t] = 0;
  std::memset(data_, 0, sizeof(data_));
}

void AmxTileModel::require_configured(const char* instruction) const {
  if (!configured()) fault(std::string(instruction) + " with no tile configuration (#UD)");
}

// TILELOADD: colsb bytes of each configured row; the rest of the tile is zeroed.
void AmxTileModel::load_tile(int t, const void* base, int64_t stride) {
  require_configured("TILELOADD");
  if (rows_[t] == 0) fault("TILELOADD to unconfigured tile " + std::to_string(t) + " (#UD)");
  std::memset(data_[t], 0, sizeof(data_[t]));
  for (int r = 0; r < rows_[t]; ++r)
    std::memcpy(data_[t][r], static_cast<const uint8_t*>(base) + r * stride, size_t(colsb_[t]));
}

void AmxTileModel::store_tile(int t, void* base, int64_t stride) const {
  require_configured("TILESTORED");
  if (rows_[t] == 0) fault("TILESTORED from unconfigured tile " + std::to_string(t) + " (#UD)");
  for (int r = 0; r < rows_[t]; ++r)
    std::memcpy(static_cast<uint8_t*>(base) + r * stride, data_[t][r], size_t(colsb_[t]));
}

// TDPBSUD, as the SDM's pseudocode: for each row m of the destination and each dword k of the row of A, the
// four signed bytes of A[m] dword k times the four unsigned bytes of B[k] dword n, added to C[m] dword n in
// 32 bits with wraparound. Rows of C past rows(C) and bytes past colsb(C) end zeroed.
void AmxTileModel::dot_tiles(int c, int a, int b) {
  require_configured("TDPBSUD");
  if (c == a || c == b || a == b) fault("TDPBSUD names one tile twice (#UD)");
  if (rows_[c] == 0 || rows_[a] == 0 || rows_[b] == 0) fault("TDPBSUD on an unconfigured tile (#UD)");
  if (rows_[a] != rows_[c] || colsb_[b] != colsb_[c] || colsb_[a] != 4 * rows_[b] || colsb_[c] % 4 != 0)
    fault("TDPBSUD shapes do not agree: C " + std::to_string(rows_[c]) + "x" + std::to_string(colsb_[c]) + ", A " +
          std::to_string(rows_[a]) + "x" + std::to_string(colsb_[a]) + ", B " + std::to_string(rows_[b]) + "x" +
          std::to_string(colsb_[b]) + " bytes (#UD)");
  g_products.fetch_add(1, std::memory_order_relaxed);
  const int K = colsb_[a] / 4, N = colsb_[c] / 4;
  for (int m = 0; m < rows_[c]; ++m) {
    uint32_t out[kTileMaxColsb / 4] = {};
    for (int n = 0; n < N; ++n) out[n] = dword(data_[c][m], n);
    for (int k = 0; k < K; ++k) {
      const uint8_t* ak = data_[a][m] + 4 * k;
      for (int n = 0; n < N; ++n) {
        const uint8_t* bk = data_[b][k] + 4 * n;
        uint32_t sum = out[n];
        for (int i = 0; i < 4; ++i) sum += uint32_t(int32_t(int8_t(ak[i])) * int32_t(bk[i]));
        out[n] = sum;
      }
    }
    std::memset(data_[c][m], 0, kTileMaxColsb);
    std::memcpy(data_[c][m], out, size_t(4 * N));
  }
  for (int m = rows_[c]; m < kTileMaxRows; ++m) std::memset(data_[c][m], 0, kTileMaxColsb);
}

}  // namespace qt::rt
