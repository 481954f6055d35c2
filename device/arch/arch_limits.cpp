#include "device/arch/arch_limits.h"

#include <algorithm>
#include <cctype>
#include <climits>

#include "common/error.h"

namespace qt::compile {
namespace {

int64_t round_up(int64_t x, int64_t unit) { return (x + unit - 1) / unit * unit; }

std::vector<ArchLimits> make_table() {
  std::vector<ArchLimits> t;
  ArchLimits a;
  // Turing: 64 KB shared per SM, no driver reservation, 256-byte shared allocation unit.
  a = ArchLimits{};
  a.sm = 75, a.example = "T4", a.example_sms = 40, a.max_threads_per_sm = 1024, a.max_blocks_per_sm = 16;
  a.smem_per_sm = 64 * 1024, a.smem_per_block_optin = 64 * 1024, a.smem_reserved_per_block = 0;
  a.smem_alloc_unit = 256;
  t.push_back(a);
  // Ampere A100: 164 KB shared per SM, 163 KB per block opt-in, 1 KB reserved per block.
  a = ArchLimits{};
  a.sm = 80, a.example = "A100", a.example_sms = 108, a.max_threads_per_sm = 2048, a.max_blocks_per_sm = 32;
  a.smem_per_sm = 164 * 1024, a.smem_per_block_optin = 163 * 1024, a.smem_reserved_per_block = 1024;
  t.push_back(a);
  // GA10x (RTX 30xx, A10, A40): 1536 threads and 16 blocks per SM, 100 KB shared.
  a = ArchLimits{};
  a.sm = 86, a.example = "RTX 3090", a.example_sms = 82, a.max_threads_per_sm = 1536, a.max_blocks_per_sm = 16;
  a.smem_per_sm = 100 * 1024, a.smem_per_block_optin = 99 * 1024, a.smem_reserved_per_block = 1024;
  t.push_back(a);
  // Ada (RTX 40xx, L4, L40): as GA10x but 24 blocks per SM.
  a = ArchLimits{};
  a.sm = 89, a.example = "RTX 4090", a.example_sms = 128, a.max_threads_per_sm = 1536, a.max_blocks_per_sm = 24;
  a.smem_per_sm = 100 * 1024, a.smem_per_block_optin = 99 * 1024, a.smem_reserved_per_block = 1024;
  t.push_back(a);
  // Hopper H100/H200: 228 KB shared per SM, 227 KB per block opt-in.
  a = ArchLimits{};
  a.sm = 90, a.example = "H100 SXM", a.example_sms = 132, a.max_threads_per_sm = 2048, a.max_blocks_per_sm = 32;
  a.smem_per_sm = 228 * 1024, a.smem_per_block_optin = 227 * 1024, a.smem_reserved_per_block = 1024;
  t.push_back(a);
  return t;
}

}  // namespace

const std::vector<ArchLimits>& all_arch_limits() {
  static const std::vector<ArchLimits> table = make_table();
  return table;
}

const ArchLimits& arch_limits(int sm) {
  for (const auto& a : all_arch_limits())
    if (a.sm == sm) return a;
  std::string known;
  for (const auto& a : all_arch_limits()) known += (known.empty() ? "" : ", ") + arch_name(a.sm);
  throw Error("unsupported GPU architecture " + arch_name(sm) + " (known: " + known + ")");
}

int parse_arch(const std::string& text) {
  std::string s = text;
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.rfind("sm_", 0) == 0) s = s.substr(3);
  else if (s.rfind("sm", 0) == 0) s = s.substr(2);
  if (!s.empty() && s.back() == 'a') s.pop_back();
  if (s.empty() || s.size() > 3 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw Error("bad GPU architecture '" + text + "' (expected e.g. sm86, sm_86 or 86)");
  int sm = std::stoi(s);
  arch_limits(sm);  // validates
  return sm;
}

std::string arch_name(int sm) { return "sm_" + std::to_string(sm); }

Occupancy occupancy(const ArchLimits& a, int registers, int threads, int64_t smem_bytes) {
  Occupancy o;
  if (threads <= 0 || threads > a.max_threads_per_block) {
    o.limiter = "block of " + std::to_string(threads) + " threads exceeds " + std::to_string(a.max_threads_per_block);
    return o;
  }
  const int warps = (threads + a.warp_size - 1) / a.warp_size;

  int by_warps = a.max_warps_per_sm() / warps;

  // Registers are granted per warp in units of reg_alloc_unit and live in per-sub-partition files; the
  // hardware's per-block check assumes the warps are spread over all sub-partitions.
  int by_regs = INT_MAX;
  const int64_t regs_per_warp = round_up(int64_t(std::max(registers, 0)) * a.warp_size, a.reg_alloc_unit);
  if (registers > a.max_regs_per_thread || regs_per_warp * round_up(warps, a.sub_partitions) > a.regs_per_block) {
    o.limiter = std::to_string(registers) + " registers per thread do not fit a block of " + std::to_string(threads);
    return o;
  }
  if (regs_per_warp > 0) {
    const int64_t warps_per_sub = (a.regs_per_sm / a.sub_partitions) / regs_per_warp;
    by_regs = static_cast<int>(warps_per_sub * a.sub_partitions / warps);
  }

  int by_smem = INT_MAX;
  const int64_t allocated = round_up(std::max<int64_t>(smem_bytes, 0) + a.smem_reserved_per_block, a.smem_alloc_unit);
  o.smem_per_block = allocated;
  if (allocated > a.smem_per_block_optin + a.smem_reserved_per_block) {
    o.limiter = std::to_string(smem_bytes) + " bytes of shared memory exceed the " +
                std::to_string(a.smem_per_block_optin) + "-byte per-block limit of " + arch_name(a.sm);
    return o;
  }
  if (allocated > 0) by_smem = static_cast<int>(a.smem_per_sm / allocated);

  o.blocks_per_sm = std::min({by_warps, by_regs, by_smem, a.max_blocks_per_sm});
  // Name the tightest resource; on ties prefer the ones a tuner can act on (registers, shared memory).
  if (o.blocks_per_sm == by_regs && by_regs < by_warps) o.limiter = "registers";
  else if (o.blocks_per_sm == by_smem && by_smem < by_warps) o.limiter = "shared memory";
  else if (o.blocks_per_sm == a.max_blocks_per_sm && a.max_blocks_per_sm < by_warps) o.limiter = "blocks";
  else o.limiter = "warps";
  o.warps_per_sm = o.blocks_per_sm * warps;
  o.fraction = double(o.warps_per_sm) / a.max_warps_per_sm();
  if (o.blocks_per_sm == 0) o.limiter = "no block fits (" + o.limiter + ")";
  return o;
}

}  // namespace qt::compile
