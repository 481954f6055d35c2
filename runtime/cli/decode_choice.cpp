#include "runtime/cli/decode_choice.h"

#include <sqlite3.h>

#include <algorithm>

#include "common/error.h"
#include "common/paths.h"

namespace qt::rt {
namespace {

std::string store_name(const std::string& prefix, const DecodeVariant& v) {
  return prefix + winners::kDecodeVariantStem + v.name;
}

}  // namespace

// kDecodeVariants is {plain, pdl, fused-norm, fused-norm+pdl}: index = 2 * fuse_norm + pdl.
DecodeVariant make_variant(bool fuse_norm, bool pdl) {
  DecodeVariant v;
  v.fuse_norm = fuse_norm;
  v.pdl = pdl;
  v.name = winners::kDecodeVariants[2 * fuse_norm + pdl];
  return v;
}

// kCpuDecodeVariants lists the prefetches in DecodePrefetch's order.
DecodeVariant make_cpu_variant(DecodePrefetch prefetch) {
  DecodeVariant v;
  v.prefetch = prefetch;
  v.name = winners::kCpuDecodeVariants[size_t(prefetch)];
  return v;
}

constexpr DecodePrefetch kCpuPrefetches[] = {DecodePrefetch::kL2, DecodePrefetch::kNone, DecodePrefetch::kL1};

std::string DecodeVariant::label() const {
  if (prefetch == DecodePrefetch::kNone) return "no prefetch";
  if (prefetch == DecodePrefetch::kL1) return "L1 prefetch";
  if (!fuse_norm && !pdl) return "plain";
  return std::string(fuse_norm ? "fused norms" : "") + (fuse_norm && pdl ? " + " : "") + (pdl ? "PDL" : "");
}

std::vector<DecodeVariant> decode_variants(const std::string& device, int arch) {
  if (device == "cpu") {
    std::vector<DecodeVariant> out;
    for (DecodePrefetch p : kCpuPrefetches) out.push_back(make_cpu_variant(p));
    return out;
  }
  std::vector<DecodeVariant> out;
  const bool pdl = device == "cuda" && arch >= 90;
  for (bool fuse : {false, true})
    for (bool p : {false, true})
      if (!p || pdl) out.push_back(make_variant(fuse, p));
  return out;
}

std::optional<DecodeVariant> variant_of(const std::string& name, const std::string& prefix) {
  // "plain" is in both lists, and the same variant.
  if (prefix != "cpu.")
    for (bool fuse : {false, true})
      for (bool p : {false, true})
        if (name == store_name(prefix, make_variant(fuse, p))) return make_variant(fuse, p);
  if (prefix == "cpu." || prefix.empty())
    for (DecodePrefetch p : kCpuPrefetches)
      if (name == store_name(prefix, make_cpu_variant(p))) return make_cpu_variant(p);
  return std::nullopt;
}

WeightType model_linear_type(const ModelWeights& w) {
  if (w.layers.empty()) return w.classifier.type;
  const LayerWeights& l = w.layers[0];
  if (!l.expert_w1.empty()) return l.expert_w1.base.type;
  return l.wq.type;
}

DecodeStepKey decode_step_key(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  return {weight_type_name(model_linear_type(w)),
          {c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.num_experts, c.num_experts_per_tok,
           c.vocab_size}};
}

void store_decode_ranking(const std::string& path, const winners::DeviceFingerprint& device, const std::string& prefix,
                          const DecodeStepKey& key, std::vector<MeasuredVariant> measured) {
  if (measured.empty()) throw Error("no decode variant was measured: nothing to store in " + path);
  std::stable_sort(measured.begin(), measured.end(),
                   [](const MeasuredVariant& a, const MeasuredVariant& b) { return a.seconds_per_step < b.seconds_per_step; });
  winners::DispatchRow row;
  row.device = device;
  row.op = winners::kDecodeStepOp;
  row.weight_type = key.weight_type;
  row.shape = key.shape;
  row.bucket = 1;
  for (const MeasuredVariant& m : measured) row.ranking.push_back({store_name(prefix, m.variant), m.seconds_per_step});
  row.run_id = "qbench --choose-decode " + winners::utc_timestamp();
  sqlite3* db = winners::open_store_read_write(path);
  try {
    // The device row too: the runtime matches its GPU against the store's devices before it reads a ranking.
    winners::in_transaction(db, [&] {
      winners::put_device(db, device);
      winners::put_dispatch_rows(db, {row});
    });
  } catch (const Error& e) {
    sqlite3_close(db);
    throw Error(path + ": the decode ranking was not stored: " + e.what(), kExitBadInput);
  }
  sqlite3_close(db);
}

void check_decode_store_writable(const std::string& path) { sqlite3_close(winners::open_store_read_write(path)); }

std::optional<StoredDecodeChoice> stored_decode_choice(const winners::WinnersTable& table,
                                                       const winners::DeviceFingerprint& device,
                                                       const std::string& prefix, const DecodeStepKey& key,
                                                       const std::vector<DecodeVariant>& runnable) {
  const std::optional<winners::DispatchEntry> entry = table.dispatch(device, winners::kDecodeStepOp, key.weight_type, key.shape, 1);
  if (!entry) return std::nullopt;
  const std::string of = std::to_string(entry->ranking.size()) + " by qbench --choose-decode (" + table.path() + ")";
  for (size_t i = 0; i < entry->ranking.size(); ++i) {
    const std::optional<DecodeVariant> v = variant_of(entry->ranking[i].family, prefix);
    if (!v) continue;
    if (std::none_of(runnable.begin(), runnable.end(), [&](const DecodeVariant& u) { return u.name == v->name; }))
      continue;
    return StoredDecodeChoice{*v, "decode step: " + v->label() +
                                      (i == 0 ? ", measured fastest of " + of
                                              : ", the fastest this run can use of " + of)};
  }
  return std::nullopt;
}

}  // namespace qt::rt
