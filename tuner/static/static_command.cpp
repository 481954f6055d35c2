#include "tuner/static/static_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <cctype>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/error.h"
#include "common/paths.h"
#include "common/flag_ranges.h"
#include "common/number_format.h"
#include "kernels_src/registry/registry.h"
#include "device/jit/compile_cache.h"
#include "device/jit/compile_service.h"
#include "models/formats/model_file.h"
#include "tuner/static/against_command.h"
#include "tuner/static/roofline.h"
#include "tuner/static/step_command.h"
#include "tuner/static/text_table.h"

namespace qt::compile {
namespace {

using kernels::KernelFamily;
using kernels::Point;

// Qwen3-8B's projections (config.json of Qwen/Qwen3-8B; AWQ checkpoints use group size 128): the shapes
// used when no model file is given.
ModelConfig qwen3_8b() {
  ModelConfig c;
  c.dim = 4096, c.hidden_dim = 12288, c.n_layers = 36, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 128;
  c.vocab_size = 151936, c.max_seq_len = 40960, c.group_size = 128;
  return c;
}

using Table = tune::TextTable;

std::vector<Point> select_points(const KernelFamily& f, const std::string& which) {
  if (which == "default") return f.default_points();
  if (which == "all") return kernels::enumerate_points(f);
  std::vector<Point> pts;  // "bm=16,bn=64;bm=32,..." (unspecified parameters take their defaults)
  std::stringstream ss(which);
  std::string item;
  while (std::getline(ss, item, ';'))
    if (!item.empty()) pts.push_back(kernels::parse_point(f, item));
  if (pts.empty()) throw Error("--points: no point given");
  return pts;
}

struct ModelShapes {
  std::string description;
  ModelConfig config;
  std::shared_ptr<ModelFile> file;  // null when no --model is given
  std::set<WeightType> types;       // the weight types of the model's matrices
  bool serves(const KernelFamily& f) const {
    if (!file || f.weight_types.empty()) return true;
    for (WeightType t : types)
      if (f.serves(t)) return true;
    return false;
  }
};

ModelShapes model_shapes(const std::string& path) {
  if (path.empty()) return {"Qwen3-8B shapes (no --model given)", qwen3_8b(), nullptr, {}};
  std::shared_ptr<ModelFile> file = ModelFile::open(path);
  const ModelWeights& w = file->weights();
  if (w.layers.empty()) throw Error(path + ": model has no layers");
  std::set<WeightType> types;
  for (const LayerWeights& l : w.layers)
    for (const QTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3})
      if (!t->empty()) types.insert(t->type);
  for (const LayerWeights& l : w.layers)
    for (const auto* experts : {&l.expert_w1, &l.expert_w2, &l.expert_w3})
      if (!experts->empty()) types.insert(experts->base.type);
  ModelConfig c = file->config();
  if (c.group_size <= 0) c.group_size = w.layers.front().wq.group_size;
  return {path + " (" + file_format_name(file->format()) + ", " + std::to_string(c.n_layers) + " layers)", c, file,
          types};
}

}  // namespace

int run_static_command(const std::vector<std::string>& args) {
  CliArgs cli("qtune static",
              "Compile kernel-family points for a GPU architecture with NVRTC (no GPU needed) and print their "
              "resources, the shapes each can serve, and compile times.");
  cli.option("--gpu", "ARCH", "target architecture: sm75, sm80, sm86, sm89, sm90", "sm86")
      .option("--kernel", "FAMILY", "one kernel family (default: all)")
      .option("--model", "FILE", "model file whose shapes to analyse (default: Qwen3-8B shapes)")
      .option("--points", "WHICH", "default | all | 'p=v,...;p=v,...'", "default")
      .option("--m", "N", "rows of the activation matrix for GEMM-type families (default: family's own)")
      .range(flag_ranges::kBatchRows)
      .option("--cache-dir", "DIR", "compile cache directory (default: $QTUNE_CACHE_DIR or ~/.cache/qtune/nvrtc)")
      .flag("--no-cache", "compile everything, do not read or write the cache")
      .option("--threads", "N", "parallel compiles; 0 = one per hardware thread", "0").range(flag_ranges::kCompileThreads)
      .option("--json", "FILE", "also write the results as JSON");
  tune::declare_step_flags(cli);
  tune::declare_against_flag(cli);
  if (!cli.parse(args)) return kExitOk;
  if (!cli.positional().empty()) throw Error("qtune static takes no positional argument: " + cli.positional()[0]);
  if (auto path = cli.get_optional("--json")) {
    if (const std::string why = output_file_problem(*path); !why.empty()) throw Error("--json " + *path + ": " + why);
    std::vector<std::string> inputs;
    for (const char* in : {"--model", "--fingerprint-store", "--against", "--against-launches"})
      if (auto v = cli.get_optional(in)) inputs.push_back(*v);
    if (const std::string why = overwrites_input(*path, inputs); !why.empty()) throw Error("--json " + why);
  }

  tune::check_step_flags(cli);
  if (cli.given("--against")) return tune::run_against(cli);
  const int sm = parse_arch(cli.get("--gpu"));
  if (cli.given("--step")) return tune::run_step_prediction(cli, sm);
  const ArchLimits& arch = arch_limits(sm);
  std::vector<const KernelFamily*> families;
  if (auto k = cli.get_optional("--kernel")) {
    const KernelFamily& f = kernels::find_family(*k);
    if (f.on_host()) throw Error("kernel family " + f.name + " runs on the host; qtune static compiles GPU families");
    families.push_back(&f);
  } else {
    for (const KernelFamily* f : kernels::all_families())
      if (!f->on_host()) families.push_back(f);
  }

  const ModelShapes ms = model_shapes(cli.get_optional("--model").value_or(""));
  const int64_t m_override = cli.given("--m") ? cli.get_int("--m") : 0;

  ServiceOptions opt;
  opt.cache_dir = cli.get_optional("--cache-dir").value_or("");
  opt.use_cache = !cli.get_flag("--no-cache");
  opt.threads = cli.get_int_as<int>("--threads");
  CompileService service(opt);

  std::cout << "qtune static: " << arch_name(sm) << " (e.g. " << arch.example << ", " << arch.example_sms
            << " SMs), NVRTC " << nvrtc_version() << ", " << ms.description << "\n"
            << "cache: " << (opt.use_cache ? service.options().cache_dir : std::string("off")) << ", "
            << service.options().threads << " compile threads\n";
  bool any_served = false;
  for (const KernelFamily* f : families) any_served = any_served || ms.serves(*f);
  if (!any_served) {
    std::string names;
    for (WeightType t : ms.types) names += (names.empty() ? "" : ", ") + std::string(weight_type_name(t));
    std::cout << "note: " << names << " weights: no registered kernel family serves this model; showing the points only\n";
  }

  nlohmann::json out_json = {{"gpu", arch_name(sm)}, {"nvrtc", nvrtc_version()}, {"families", nlohmann::json::array()}};
  size_t total_programs = 0, total_hits = 0, total_points = 0, total_pruned = 0;
  double cold_seconds = 0, hit_seconds = 0;
  const auto wall_start = std::chrono::steady_clock::now();

  for (const KernelFamily* f : families) {
    std::cout << "\n== " << f->name << ": " << f->summary << "\n";
    if (sm < f->min_sm) {
      std::cout << "   skipped: needs " << arch_name(f->min_sm) << " or newer\n";
      continue;
    }
    const std::vector<Point> points = select_points(*f, cli.get("--points"));
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<PointResult> results = service.compile(*f, points, sm);
    const double family_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    Table t;
    t.head = {"point", "kernel", "regs", "spill(st/ld)", "stack", "smem st+dyn", "thr", "blk/SM", "occ", "limiter",
              "compile", "status"};
    std::map<std::string, bool> counted;  // compile times are per program, count each once
    nlohmann::json fam = {{"family", f->name}, {"points", nlohmann::json::array()}};
    for (const auto& r : results) {
      const std::string key = kernels::point_key(r.point);
      nlohmann::json pj = {{"point", r.point}, {"error", r.error}, {"pruned", r.pruned}, {"cache_hit", r.cache_hit},
                           {"seconds", r.seconds}, {"same_code_as", r.same_code_as}, {"kernels", nlohmann::json::array()}};
      ++total_points;
      if (!r.ok()) {
        t.rows.push_back({key, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "COMPILE ERROR"});
        std::cerr << "compile error for " << f->name << " " << key << ":\n" << r.error << "\n";
        fam["points"].push_back(pj);
        continue;
      }
      const std::string program = r.cubin_sha256;
      if (!counted[program]) {
        counted[program] = true;
        ++total_programs;
        if (r.cache_hit) ++total_hits, hit_seconds += r.seconds;
        else cold_seconds += r.seconds;
      }
      if (!r.pruned.empty()) ++total_pruned;
      std::string status = r.pruned.empty() ? "ok" : "PRUNED: " + r.pruned;
      if (r.pruned.empty() && !r.same_code_as.empty()) status = "ok, same code as " + r.same_code_as;
      bool first = true;
      for (const auto& k : r.kernels) {
        const auto& res = k.resources;
        t.rows.push_back({first ? key : "", k.name_expression, std::to_string(res.registers),
                          std::to_string(res.spill_stores) + "/" + std::to_string(res.spill_loads),
                          std::to_string(res.stack_frame),
                          std::to_string(res.static_smem) + "+" + std::to_string(k.dynamic_smem),
                          std::to_string(k.block_threads), std::to_string(k.occupancy.blocks_per_sm),
                          format_number("%.0f%%", 100.0 * k.occupancy.fraction), k.occupancy.limiter,
                          first ? format_number("%.0f ms", 1000.0 * r.seconds) + (r.cache_hit ? " (hit)" : "") : "",
                          first ? status : ""});
        pj["kernels"].push_back({{"name", k.name_expression}, {"lowered", k.lowered_name}, {"resources", res},
                                 {"threads", k.block_threads}, {"dynamic_smem", k.dynamic_smem},
                                 {"blocks_per_sm", k.occupancy.blocks_per_sm},
                                 {"occupancy", k.occupancy.fraction}, {"limiter", k.occupancy.limiter}});
        first = false;
      }
      fam["points"].push_back(pj);
    }
    t.print(std::cout);
    std::cout << "   " << results.size() << " points, compiled in " << format_number("%.2f s", family_wall) << " wall\n";

    // Which points can serve each shape the model needs, and how many waves their grid makes.
    if (!ms.serves(*f)) {
      if (any_served) std::cout << "   serves none of this model's weight types\n";
      out_json["families"].push_back(fam);
      continue;
    }
    std::vector<kernels::Shape> shapes = f->model_shapes ? f->model_shapes(ms.config, ms.file ? &ms.file->weights() : nullptr)
                                                         : std::vector<kernels::Shape>{};
    if (m_override)
      for (auto& s : shapes)
        for (size_t d = 0; d < s.names.size(); ++d)
          if (s.names[d] == "M") s.values[d] = m_override;
    Table st;
    st.head = {"shape", "layers", "usable points", "grid (first usable)", "waves on " + std::string(arch.example),
               "model: fastest point on " + std::string(arch.example), "us", "bound", "in flight/SM", "bandwidth"};
    for (const auto& s : shapes) {
      size_t usable = 0;
      std::string grid = "-", waves = "-";
      std::string why_not;
      // The roofline model's fastest usable point (roofline.h), with the registers ptxas reported.
      std::optional<tune::RooflineEstimate> best;
      std::string best_key = "-";
      nlohmann::json model_points = nlohmann::json::array();
      for (const auto& r : results) {
        if (!r.ok() || !r.pruned.empty()) continue;
        const std::string reason = f->shape_constraint(r.point, s);
        if (!reason.empty()) {
          if (why_not.empty()) why_not = reason;
          continue;
        }
        try {
          const tune::RooflineEstimate e = tune::estimate_point(*f, r.point, s, sm, tune::model_resources(r.kernels));
          model_points.push_back({{"point", r.point}, {"model_us", e.seconds * 1e6}, {"bound", e.bound},
                                  {"memory_us", e.memory_s * 1e6}, {"compute_us", e.compute_s * 1e6},
                                  {"issue_us", e.issue_s * 1e6},
                                  {"wave_efficiency", e.wave_efficiency}, {"memory_efficiency", e.memory_efficiency},
                                  {"bytes_in_flight_per_sm", e.bytes_in_flight_per_sm},
                                  {"bandwidth_share", e.bandwidth_share}});
          if (!best || e.seconds < best->seconds) best = e, best_key = kernels::point_key(r.point);
        } catch (const std::exception&) {
          // a point the model cannot place (an architecture without figures) keeps the table's other columns
        }
        if (usable++ == 0) {
          const kernels::LaunchPlan plan = f->plan(r.point, s);
          const auto& l = plan.launches.front();
          grid = std::to_string(l.grid.x) + "x" + std::to_string(l.grid.y) + "x" + std::to_string(l.grid.z);
          const int bps = r.kernel(l.kernel).occupancy.blocks_per_sm;
          if (bps > 0)
            waves = format_number("%.2f", double(l.grid.count()) / (double(bps) * arch.example_sms));
        }
      }
      st.rows.push_back({kernels::shape_key(s), s.label,
                         std::to_string(usable) + "/" + std::to_string(results.size()) +
                             (usable == 0 && !why_not.empty() ? " (" + why_not + ")" : ""),
                         grid, waves, best_key, best ? format_number("%.2f", best->seconds * 1e6) : "-",
                         best ? best->bound : "-",
                         best ? format_number("%.1f KB", best->bytes_in_flight_per_sm / 1024) : "-",
                         best ? format_number("%.0f%%", 100 * best->bandwidth_share) : "-"});
      nlohmann::json sj = {{"label", s.label}, {"usable_points", usable}, {"model", model_points}};
      for (size_t d = 0; d < s.names.size() && d < s.values.size(); ++d) {
        std::string key = s.names[d];
        for (char& ch : key) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        sj[key] = s.values[d];
      }
      fam["shapes"].push_back(sj);
    }
    std::cout << "\n";
    st.print(std::cout);
    out_json["families"].push_back(fam);
  }

  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  const size_t cold = total_programs - total_hits;
  std::cout << "\ncompile: " << total_points << " points, " << total_programs << " distinct CUBINs, " << cold
            << " compiled (" << (cold ? format_number("%.0f ms", 1000.0 * cold_seconds / double(cold)) : std::string("-"))
            << " per program), " << total_hits << " from cache ("
            << (total_hits ? format_number("%.1f ms", 1000.0 * hit_seconds / double(total_hits)) : std::string("-"))
            << " per hit), " << total_pruned << " pruned; " << format_number("%.2f s", wall) << " wall\n";
  out_json["summary"] = {{"points", total_points}, {"programs", total_programs}, {"compiled", cold},
                         {"cache_hits", total_hits}, {"cold_seconds", cold_seconds}, {"hit_seconds", hit_seconds},
                         {"pruned", total_pruned}, {"wall_seconds", wall}};
  if (auto path = cli.get_optional("--json")) {
    std::ofstream jf(*path);
    jf << out_json.dump(1) << "\n";
    if (!jf) throw Error("cannot write " + *path, kExitFailure);
  }
  return kExitOk;
}

}  // namespace qt::compile
