// qrun --device emu|cuda as a user runs it: the emulator generates the CPU reference's greedy tokens and
// writes logits close to the golden ones; cuda without a driver, MoE models on the device and
// contradictory options each end with one clear line and their exit code.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/paths.h"
#include "runtime/cli/decode_trial.h"

using namespace std::string_literals;

namespace {

const std::string kQrun = qt::binary_root() + "/bin/qrun";
const std::string kFiles = qt::source_root() + "/tests/golden/files/";
const std::string kTmp = qt::binary_root() + "/tests/qrun-device-";

struct Result {
  int code;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result qrun(const std::string& args, const std::string& env = "") {
  const std::string tag = std::to_string(::getpid());
  const std::string out = kTmp + "out-" + tag, err = kTmp + "err-" + tag;
  const int status = std::system((env + " " + kQrun + " " + args + " >" + out + " 2>" + err).c_str());
  return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Each run of `common` plus a case's arguments refused with exit 2, in one line holding the case's words.
void check_refused(const std::string& common, const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [args, needle] : cases) {
    const Result r = qrun(common + " " + args);
    INFO(args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(needle) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("qrun --device emu generates the CPU reference's greedy tokens and reports its kernel choices") {
  for (const char* file : {"dense.ajc1", "dense.ak48"}) {
    INFO(file);
    const std::string common = "--model "s + kFiles + file + " --prompt-ids 0,361,239,262,343 -n 12 --temp 0";
    const Result cpu = qrun(common + " --reference --no-stats");
    const Result emu = qrun(common + " --device emu");
    REQUIRE(cpu.code == 0);
    REQUIRE(emu.code == 0);
    CHECK(lines(emu.out) == 12);
    CHECK(emu.out == cpu.out);
    CHECK(emu.err.find("op shapes:") != std::string::npos);
    CHECK(emu.err.find("family default") != std::string::npos);
    CHECK(emu.err.find("replayed") != std::string::npos);
  }
}

TEST_CASE("qrun --device emu runs a Q8_0 model's projections on the frag layout, and --weight-layout file on the Q8_0 kernels") {
  // Q8_0 is INT8 group-wise symmetric with its fp32 scales rounded to fp16, repacked at load time: the frag
  // families serve every dense projection, the lm_head keeps the file layout, and the tokens are the CPU's.
  const std::string common = "--model "s + kFiles + "dense.ajc1 --prompt-ids 0,361,239,262,343 -n 6 --temp 0";
  const Result cpu = qrun(common + " --reference --no-stats");
  const Result frag = qrun(common + " --device emu -v");
  const Result file = qrun(common + " --device emu -v --weight-layout file");
  REQUIRE(cpu.code == 0);
  REQUIRE(frag.code == 0);
  REQUIRE(file.code == 0);
  CHECK(frag.out == cpu.out);
  CHECK(file.out == cpu.out);
  INFO(frag.err << "\n" << file.err);
  // Decode's q (N=160) and o (K=160) projections and the prompt's (M=5); in the file layout q, k and v decode
  // as one concatenated launch and gate/up as the fused family, so o and the prompt's q name the kernels there.
  for (const char* shape : {"M=1 N=160 K=96", "M=1 N=96 K=160", "M=5 N=160 K=96"}) {
    CHECK(frag.err.find("linear.frag|Q8_0|"s + shape + " G=32 -> q8_0_frag_") != std::string::npos);
    CHECK(frag.err.find("linear|Q8_0|"s + shape + " G=32 -> ") == std::string::npos);
  }
  for (const char* shape : {"M=1 N=96 K=160", "M=5 N=160 K=96"})
    CHECK(file.err.find("linear|Q8_0|"s + shape + " G=32 -> q8_0_") != std::string::npos);
  CHECK(file.err.find("linear.frag|") == std::string::npos);
  CHECK(frag.err.find("gate_up_swiglu|") == std::string::npos);  // it reads the file layout
  for (const Result* r : {&frag, &file})
    CHECK(r->err.find("linear|Q8_0|M=1 N=384 K=96 G=32 -> q8_0_gemv") != std::string::npos);  // the lm_head
}

TEST_CASE("qrun --device emu --logits-out writes logits within the fp16 tolerance of the golden ones") {
  // dense.ak48 holds the ak48-awq scheme; its golden seq0 is [0, 361, 239, 262, 343, 221, 383].
  const std::string out = kTmp + "logits.f32";
  std::remove(out.c_str());
  const Result r = qrun("--device emu --model " + kFiles + "dense.ak48 --prompt-ids 0,361,239,262,343,221,383 -n 0 "
                        "--logits-out " + out);
  REQUIRE(r.code == 0);
  std::ifstream got_in(out, std::ios::binary), want_in(qt::source_root() + "/tests/golden/logits/dense/ak48-awq/seq0.f32",
                                                        std::ios::binary);
  std::vector<float> got(7 * 384), want(7 * 384);
  got_in.read(reinterpret_cast<char*>(got.data()), std::streamsize(got.size() * 4));
  want_in.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * 4));
  REQUIRE(got_in.gcount() == std::streamsize(got.size() * 4));
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  WARN("max |emu - transformers| = " << worst);
  CHECK(worst <= 0.04f);  // the fp16 activation tolerance of backend_suite.cpp
}

TEST_CASE("qrun --device cuda without a driver exits 3 with one line naming the reason") {
  const Result r = qrun("--device cuda --model " + kFiles + "dense.ajc1 --prompt-ids 1,2 -n 1",
                        "QTUNE_LIBCUDA=/nonexistent/libcuda.so.1");
  CHECK(r.code == 3);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("cuda") != std::string::npos);
}

TEST_CASE("qrun --pdl is a CUDA option: refused on the emulator and the CPU, and without a driver exits 3") {
  for (const char* device : {"emu", "cpu"}) {
    INFO(device);
    const Result r = qrun(std::string("--device ") + device + " --pdl --model " + kFiles + "dense.ajc1 --prompt-ids 1 -n 1");
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find("--pdl") != std::string::npos);
  }
  const Result r = qrun("--device cuda --pdl --model " + kFiles + "dense.ajc1 --prompt-ids 1,2 -n 1",
                        "QTUNE_LIBCUDA=/nonexistent/libcuda.so.1");
  CHECK(r.code == 3);
  CHECK(lines(r.err) == 1);
}

TEST_CASE("qrun --device emu runs a MoE model to the CPU reference's tokens, TensorRT-LLM INT8 layout included") {
  const std::string args = " --prompt-ids 5,6,7,8 -n 6 --temp 0 --no-stats";
  for (const char* file : {"moe-norm.int8-sym.moe3", "moe-nonorm.q8_0.moe3"}) {
    INFO(file);
    const Result cpu = qrun("--reference --model " + kFiles + file + args);
    const Result emu = qrun("--device emu --model " + kFiles + file + args);
    REQUIRE(cpu.code == 0);
    CHECK(emu.code == 0);
    CHECK(emu.out == cpu.out);
  }
  const Result trt = qrun("--device emu --int8-layout trtllm --model " + kFiles + "moe-norm.int8-asym.moe3" + args);
  const Result cpu = qrun("--reference --model " + kFiles + "moe-norm.int8-asym.moe3" + args);
  CHECK(trt.code == 0);
  CHECK(trt.out == cpu.out);
  const Result bad = qrun("--device emu --int8-layout cutlass --model " + kFiles + "moe-norm.int8-asym.moe3" + args);
  CHECK(bad.code == 2);
  CHECK(lines(bad.err) == 1);
}

TEST_CASE("qrun --device emu --emu-arch sm90 --expert-layout frag runs MoE experts on the wgmma grouped GEMMs to the CPU tokens") {
  const std::string args = " --prompt-ids 5,6,7,8 -n 6 --temp 0 --no-stats";
  for (const char* file : {"moe-norm.awq.moe3", "moe-norm.int8-sym.moe3", "moe-nonorm.q8_0.moe3"}) {
    INFO(file);
    const Result cpu = qrun("--reference --model " + kFiles + file + args);
    const Result emu = qrun("--device emu --emu-arch sm90 --expert-layout frag -v --model " + kFiles + file + args);
    REQUIRE(cpu.code == 0);
    CHECK(emu.code == 0);
    CHECK(emu.out == cpu.out);
    // Both grouped GEMMs ran on the Hopper families, at the prompt and at decode.
    CHECK(emu.err.find("moe_gate_up.frag|") != std::string::npos);
    CHECK(emu.err.find("-> moe_gate_up.frag.") != std::string::npos);
    CHECK(emu.err.find("-> moe_down.frag.") != std::string::npos);
  }
  // Before Hopper there is no wgmma: refused at load, in one line, as an absent facility.
  const Result old = qrun("--device emu --emu-arch sm80 --expert-layout frag --model " + kFiles + "moe-norm.awq.moe3" + args);
  CHECK(old.code == 3);
  CHECK(lines(old.err) == 1);
  const Result both = qrun("--device emu --emu-arch sm90 --expert-layout frag --int8-layout trtllm --model " + kFiles +
                           "moe-norm.int8-sym.moe3" + args);
  CHECK(both.code == 2);
  CHECK(lines(both.err) == 1);
}

TEST_CASE("qrun without --expert-layout runs MoE experts on the wgmma grouped GEMMs on sm90 and as stored before") {
  const std::string model = " --model " + kFiles + "moe-norm.awq.moe3 --prompt-ids 5,6,7,8 -n 4 --temp 0 --no-stats -v";
  const Result hopper = qrun("--device emu --emu-arch sm90" + model);
  REQUIRE(hopper.code == 0);
  CHECK(hopper.err.find("-> moe_gate_up.frag.") != std::string::npos);
  const Result ampere = qrun("--device emu --emu-arch sm80" + model);
  REQUIRE(ampere.code == 0);
  CHECK(ampere.err.find(".frag.") == std::string::npos);
  CHECK(ampere.err.find("-> moe_gate_up.") != std::string::npos);
  CHECK(ampere.out == hopper.out);
  // TensorRT-LLM's INT8 layout, asked for, is the experts' layout on sm90 too.
  const Result trtllm = qrun("--device emu --emu-arch sm90 --int8-layout trtllm --model " + kFiles +
                             "moe-norm.int8-sym.moe3 --prompt-ids 5,6,7,8 -n 2 --temp 0 --no-stats -v");
  CHECK(trtllm.code == 0);
  CHECK(trtllm.err.find(".trtllm") != std::string::npos);
  CHECK(qrun("--device emu --expert-layout sideways" + model).code == 2);
}

TEST_CASE("qrun --device emu --predequantize generates the CPU reference's tokens from fp16 weights, and the CPU refuses it") {
  const std::string common = "--model "s + kFiles + "dense.ak48 --prompt-ids 0,361,239,262,343 -n 10 --temp 0";
  const Result cpu = qrun(common + " --reference --no-stats");
  const Result emu = qrun(common + " --device emu --predequantize -v");
  REQUIRE(cpu.code == 0);
  REQUIRE(emu.code == 0);
  CHECK(emu.out == cpu.out);
  // The emulator has no cuBLASLt, so every fp16 linear runs on our kernels, and the line says so.
  CHECK(emu.err.find("on our kernels") != std::string::npos);
  const Result bad = qrun(common + " --predequantize");
  CHECK(bad.code == 2);
  CHECK(lines(bad.err) == 1);
  CHECK(bad.err.find("--predequantize") != std::string::npos);
}

TEST_CASE("qrun --device emu --prefill-f16 prefills on the fp16 copy with --predequantize's logits bit for bit, "
          "decodes on the quantized weights, and refuses what it cannot keep a copy beside") {
  // 70 prompt rows: the projections' GEMMs take the copy from blas::kF16CopyRows (64) rows.
  std::string ids = "1";
  for (int i = 2; i <= 70; ++i) ids += "," + std::to_string(i);
  const std::string common = "--model "s + kFiles + "dense-tied.ak48 --prompt-ids " + ids;
  auto logits = [&](const std::string& args) {
    const std::string out = kTmp + "prefill-logits-" + std::to_string(::getpid());
    const Result r = qrun(common + " -n 0 --device emu --no-stats --logits-out " + out + " " + args);
    INFO(args << "\n" << r.err);
    CHECK(r.code == 0);
    const std::string bytes = slurp(out);
    std::remove(out.c_str());
    return bytes;
  };
  const std::string copy = logits("--prefill-f16"), f16 = logits("--predequantize"), quantized = logits("");
  REQUIRE(copy.size() == 70u * 320u * 4u);
  // The same fp16 weights through the same GEMMs. (dense-tied.ak48's lm_head is its fp16 embedding: with a
  // quantized lm_head --predequantize would hold it as fp16 and --prefill-f16 would not, and the logits would differ.)
  CHECK(copy == f16);
  CHECK(copy != quantized);   // not the frag GEMMs on the quantized weights
  const Result cpu = qrun(common + " -n 6 --temp 0 --reference --no-stats");
  const Result emu = qrun(common + " -n 6 --temp 0 --device emu --prefill-f16");
  REQUIRE(emu.code == 0);
  CHECK(emu.out == cpu.out);
  // 2 layers of q, k, v, o, gate, up and down on the copy at the prompt; the decode steps on the frag GEMVs.
  CHECK(emu.err.find("prefill on the fp16 copy: 14 linears") != std::string::npos);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"--device emu --prefill-f16 --predequantize", "--prefill-f16 keeps the quantized weights beside an fp16 copy"},
      {"--device emu --prefill-f16 --weight-layout file", "--prefill-f16 keeps its copy beside the frag layout's"},
      {"--prefill-f16", "--prefill-f16 is a device option"}};
  check_refused(common + " -n 1", refused);
}

TEST_CASE("qrun --device emu refuses --reference with one line") {
  const Result ref = qrun("--device emu --reference --model " + kFiles + "dense.ajc1 --prompt-ids 1 -n 1");
  CHECK(ref.code == 2);
  CHECK(lines(ref.err) == 1);
  CHECK(ref.err.find("--reference") != std::string::npos);
}

TEST_CASE("qrun --device emu --tuned-cache runs the winners qtune --device emu stored, exact and nearest") {
  const std::string store = kTmp + "tuned-" + std::to_string(::getpid()) + ".sqlite";
  std::remove(store.c_str());
  const std::string qtune = qt::binary_root() + "/bin/qtune";
  REQUIRE(std::system((qtune + " --device emu --family rmsnorm --shape 1,96,1 --budget 3 --cache " + store +
                       " >/dev/null 2>&1").c_str()) == 0);
  const Result r = qrun("--device emu --model " + kFiles + "dense.ajc1 --prompt-ids 0,361,239 -n 2 --temp 0 -v "
                        "--tuned-cache " + store);
  REQUIRE(r.code == 0);
  // The decode step's post-attention norm (M=1, N=96, with the residual) is the tuned shape itself; the other
  // rmsnorm shapes take the nearest tuned one; every other op its family default.
  CHECK(r.err.find("1 tuned, 3 nearest tuned shape") != std::string::npos);
  CHECK(r.err.find("rmsnorm|-|M=1 N=96 R=1 -> rmsnorm") != std::string::npos);
  CHECK(r.err.find("(tuned)") != std::string::npos);
  std::remove(store.c_str());
}

// qtune on the emulator of `arch` tunes only `family` for dense.ak48; qrun then decodes with that store on the
// same emulated architecture. Returns qrun's verbose result after checking the CPU's tokens and that every
// dense projection (the decode rows exactly, the 5-row prompt on the nearest tuned batch) ran `family`.
Result decode_with_tuned_family(const std::string& family, const std::string& arch, const std::string& store) {
  std::remove(store.c_str());
  const std::string qtune = qt::binary_root() + "/bin/qtune";
  REQUIRE(std::system((qtune + " --device emu --gpu " + arch + " --model " + kFiles + "dense.ak48 --families " + family +
                       " --buckets 1 --budget 2 --quiet --cache " + store + " >/dev/null 2>&1").c_str()) == 0);
  const std::string common = "--model "s + kFiles + "dense.ak48 --prompt-ids 0,361,239,262,343 -n 4 --temp 0";
  const Result cpu = qrun(common + " --reference --no-stats");
  const Result emu = qrun(common + " --device emu --emu-arch " + arch + " -v --tuned-cache " + store);
  REQUIRE(cpu.code == 0);
  REQUIRE(emu.code == 0);
  CHECK(emu.out == cpu.out);
  for (const char* shape : {"M=1 N=160 K=96", "M=1 N=96 K=160", "M=5 N=160 K=96"}) {
    INFO(shape << "\n" << emu.err);
    CHECK(emu.err.find("linear.frag|AWQ_INT4|"s + shape + " G=32 -> " + family) != std::string::npos);
  }
  return cpu;
}

TEST_CASE("qrun --device emu decodes an AWQ model to the CPU's tokens with its projections on the streaming GEMV qtune chose") {
  // The streaming GEMV reads the frag layout the runtime already holds: once a tuned dispatch names it, every
  // dense projection runs it, with the same tokens.
  const std::string store = kTmp + "stream-" + std::to_string(::getpid()) + ".sqlite";
  decode_with_tuned_family("awq_frag_stream_gemv", "sm80", store);
  std::remove(store.c_str());
}

TEST_CASE("qrun --device emu --emu-arch sm90 decodes an AWQ model to the CPU's tokens with its projections on the wgmma GEMM qtune chose") {
  // The Hopper GEMM reads the same frag layout: tuned on an emulated sm_90 it runs every dense projection of
  // the prompt and of each decode step, through wgmma with the weights in registers, to the same tokens.
  const std::string store = kTmp + "wgmma-" + std::to_string(::getpid()) + ".sqlite";
  const Result cpu = decode_with_tuned_family("awq_frag_wgmma_gemm", "sm90", store);
  // An emulated sm_80 cannot run it: the same store's winners are another device's, and qrun says so.
  const Result sm80 = qrun("--model "s + kFiles + "dense.ak48 --prompt-ids 0,361,239,262,343 -n 4 --temp 0 --device emu -v "
                           "--tuned-cache " + store);
  REQUIRE(sm80.code == 0);
  CHECK(sm80.out == cpu.out);
  CHECK(sm80.err.find("-> awq_frag_wgmma_gemm") == std::string::npos);
  std::remove(store.c_str());
}

namespace {

// A store holding only a decode-step ranking for dense.ak48 on the emulator, fastest first as `order` lists the
// variants: qbench --choose-decode's export with its ranking rewritten, imported as a user moves a store.
std::string store_ranking(const nlohmann::json& exported, const std::vector<std::string>& order, const std::string& tag) {
  nlohmann::json j = exported;
  REQUIRE(j["dispatch"].size() == 1);
  nlohmann::json ranking = nlohmann::json::array();
  double t = 1e-3;
  for (const std::string& v : order) ranking.push_back({{"family", "emu.decode." + v}, {"median_s", t += 1e-3}});
  j["dispatch"][0]["ranking"] = ranking;
  const std::string json = kTmp + "ranking-" + tag + "-" + std::to_string(::getpid()) + ".json";
  const std::string store = kTmp + "ranking-" + tag + "-" + std::to_string(::getpid()) + ".sqlite";
  std::ofstream(json) << j.dump();
  std::remove(store.c_str());
  const std::string qtune = qt::binary_root() + "/bin/qtune";
  REQUIRE(std::system((qtune + " store import " + json + " --cache " + store + " >/dev/null 2>&1").c_str()) == 0);
  std::remove(json.c_str());
  return store;
}

}  // namespace

TEST_CASE("qbench --choose-decode stores the decode variants the emulator runs, and qrun --tuned-cache runs the "
          "stored fastest one it can, unless the command line chooses") {
  const std::string model = kFiles + "dense.ak48";
  const std::string store = kTmp + "decode-" + std::to_string(::getpid()) + ".sqlite";
  std::remove(store.c_str());
  const std::string qbench = qt::binary_root() + "/bin/qbench", qtune = qt::binary_root() + "/bin/qtune";
  const std::string out = kTmp + "choose-" + std::to_string(::getpid());
  REQUIRE(std::system((qbench + " --device emu --model " + model + " --tuned-cache " + store +
                       " --choose-decode --prompt 3 --gen 2 --repeat 1 >" + out + " 2>/dev/null").c_str()) == 0);
  const std::string table = slurp(out);
  INFO(table);
  // The emulator runs the plain step and the fused one; PDL is a GPU's (sm_90+).
  CHECK(table.find("plain ") != std::string::npos);
  CHECK(table.find("fused norms ") != std::string::npos);
  CHECK(table.find("PDL") == std::string::npos);
  CHECK(table.find("stored in " + store) != std::string::npos);
  // The ranking is a valid store row: `qtune store check` knows the variants' names.
  REQUIRE(std::system((qtune + " store check --cache " + store + " >" + out + " 2>&1").c_str()) == 0);
  CHECK(slurp(out).find("1 dispatch entries, 1 devices, integrity ok, 0 bad rows") != std::string::npos);
  REQUIRE(std::system((qtune + " store export --cache " + store + " --out " + out).c_str()) == 0);
  const nlohmann::json exported = nlohmann::json::parse(slurp(out));
  std::remove(out.c_str());
  CHECK(exported["dispatch"][0]["op"] == "decode.step");

  const std::string fused_first = store_ranking(exported, {"fused-norm", "plain"}, "fused");
  const std::string plain_first = store_ranking(exported, {"plain", "fused-norm"}, "plain");
  const std::string pdl_first = store_ranking(exported, {"fused-norm+pdl", "pdl", "fused-norm", "plain"}, "pdl");
  const std::string common = "--model " + model + " --prompt-ids 0,361,239,262,343 -n 4 --temp 0 --device emu";
  const Result cpu = qrun("--model " + model + " --prompt-ids 0,361,239,262,343 -n 4 --temp 0 --reference --no-stats");
  REQUIRE(cpu.code == 0);
  auto decode = [&](const std::string& args) {
    const Result r = qrun(common + " " + args);
    INFO(args << "\n" << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out == cpu.out);  // every variant decodes to the CPU's tokens
    return r.err;
  };
  const std::string fused = decode("--tuned-cache " + fused_first);
  CHECK(fused.find("decode step: fused norms, measured fastest of 2 by qbench --choose-decode") != std::string::npos);
  CHECK(fused.find("attentions with their RoPE") != std::string::npos);  // the fused step ran
  const std::string plain = decode("--tuned-cache " + plain_first);
  CHECK(plain.find("decode step: plain, measured fastest of 2") != std::string::npos);
  CHECK(plain.find("fused norms:") == std::string::npos);
  // PDL ranked first is a GPU's: the emulator takes the fastest variant it runs, and says it is not the first.
  const std::string pdl = decode("--tuned-cache " + pdl_first);
  CHECK(pdl.find("decode step: fused norms, the fastest this run can use of 4") != std::string::npos);
  // The frag layout's GEMVs are what fuse: with the file layout the fused variants do not apply.
  const std::string file_layout = decode("--weight-layout file --tuned-cache " + fused_first);
  CHECK(file_layout.find("decode step: plain, the fastest this run can use of 2") != std::string::npos);
  // The command line chooses over the store, and --no-stored-decode ignores it.
  const std::string told = decode("--fuse-norm --tuned-cache " + plain_first);
  CHECK(told.find("decode step:") == std::string::npos);
  CHECK(told.find("fused norms:") != std::string::npos);
  const std::string ignored = decode("--no-stored-decode --tuned-cache " + fused_first);
  CHECK(ignored.find("decode step:") == std::string::npos);
  CHECK(ignored.find("fused norms:") == std::string::npos);
  // A ranking is the model's own: another model (dense.ajc1, Q8_0) finds none in this store, runs plain and says
  // nothing of it.
  const Result other = qrun("--model " + kFiles + "dense.ajc1 --prompt-ids 0,361,239 -n 2 --temp 0 --device emu "
                            "--tuned-cache " + fused_first);
  REQUIRE(other.code == 0);
  CHECK(other.err.find("decode step:") == std::string::npos);
  CHECK(other.err.find("fused norms:") == std::string::npos);
  for (const std::string& s : {store, fused_first, plain_first, pdl_first}) std::remove(s.c_str());
}

// The trial's bookkeeping on given step times: each candidate's untimed steps, its timed ones, the switch, and the
// faster median kept; a candidate that cannot run here left out and named.
TEST_CASE("a decode trial times each variant after its untimed steps and goes on with the smallest median") {
  using qt::rt::DecodeTrial;
  using qt::rt::DecodeVariant;
  const std::vector<DecodeVariant> two = qt::rt::trial_candidates(true, true);
  REQUIRE(two.size() == 2);
  CHECK(two[0].name == "plain");
  CHECK(two[1].name == "fused-norm+pdl");
  CHECK(qt::rt::trial_candidates(true, false).back().name == "pdl");  // no fused norms on these weights
  CHECK(qt::rt::trial_candidates(false, true).back().name == "fused-norm");  // no PDL: the emulator, sm_80-89, a driver
  CHECK(qt::rt::trial_candidates(false, false).size() == 1);  // plain alone: nothing to choose
  std::vector<std::string> applied;
  auto apply = [&](const DecodeVariant& v) {
    applied.push_back(v.name);
    return std::string();
  };
  {
    DecodeTrial t(two, apply, 2, 3);
    CHECK(applied == std::vector<std::string>{"plain"});
    for (double s : {9.0, 9.0, 5.0, 6.0, 5.5}) t.step_done(s);  // plain: two untimed, then 5, 6, 5.5
    CHECK(applied.back() == "fused-norm+pdl");
    CHECK(!t.done());
    CHECK(t.line().find("stopped after 5 decode steps, before it could compare them: plain 5500.00 ms") !=
          std::string::npos);
    for (double s : {9.0, 9.0, 4.0, 7.0, 4.5}) t.step_done(s);  // fused + PDL: median 4.5 against 5.5
    CHECK(t.done());
    CHECK(t.running().name == "fused-norm+pdl");
    CHECK(applied.size() == 2);  // the winner was running: nothing to switch
    CHECK(t.line() == "decode step: fused norms + PDL, timed fastest of 2 on this run's first 10 decode steps "
                      "(median a step: plain 5500.00 ms, fused norms + PDL 4500.00 ms)");
    t.step_done(100.0);  // past the trial: nothing changes
    CHECK(t.line().find("first 10 decode steps") != std::string::npos);
  }
  applied.clear();
  {
    DecodeTrial t(two, apply, 0, 2);
    for (double s : {3.0, 3.0, 3.0, 3.0}) t.step_done(s);  // a tie keeps plain, switched back to
    CHECK(t.done());
    CHECK(t.running().name == "plain");
    CHECK(applied == std::vector<std::string>{"plain", "fused-norm+pdl", "plain"});
  }
  // A candidate refused when its turn comes: left out and named, and the variant that ran applies again, since the
  // refused one's try may have changed the device's state.
  applied.clear();
  auto no_pdl = [&](const DecodeVariant& v) {
    applied.push_back(v.name);
    return v.pdl ? std::string("the driver refused it") : std::string();
  };
  DecodeTrial t(two, no_pdl, 1, 1);
  t.step_done(1.0);
  t.step_done(1.0);
  CHECK(t.done());
  CHECK(t.running().name == "plain");
  CHECK(applied == std::vector<std::string>{"plain", "fused-norm+pdl", "plain"});
  CHECK(t.line().find("; fused norms + PDL not run (the driver refused it)") != std::string::npos);
  CHECK_THROWS_AS(DecodeTrial({two[0]}, apply), qt::Error);
}

TEST_CASE("qrun --decode trial times plain against fused norms on the first decode steps, goes on with the faster, "
          "and samples the tokens either variant alone samples, and --decode names a variant as --fuse-norm does") {
  // dense-tied.ak48 stores q|k|v concatenated in the frag layout, so its fused variant fuses the GEMVs' norms too;
  // sampling (seeded) follows the logits more closely than its greedy tokens do.
  const std::string common = "--model " + kFiles + "dense-tied.ak48 --prompt-ids 0,31,239,262,43 --temp 0.9 --seed 5 "
                             "--device emu";
  const Result plain = qrun(common + " -n 20 --decode plain");
  const Result fused = qrun(common + " -n 20 --decode fused-norm");
  REQUIRE(plain.code == 0);
  REQUIRE(fused.code == 0);
  CHECK(fused.out == plain.out);
  CHECK(plain.err.find("decode step:") == std::string::npos);
  CHECK(fused.err.find("fused norms: 76 normalizing") != std::string::npos);
  // 19 decode steps hold the trial's 2 x (2 untimed + 6 timed).
  const Result trial = qrun(common + " -n 20 --decode trial");
  INFO(trial.err);
  REQUIRE(trial.code == 0);
  CHECK(trial.out == plain.out);
  CHECK(trial.err.find(", timed fastest of 2 on this run's first 16 decode steps (median a step: plain ") !=
        std::string::npos);
  CHECK(trial.err.find("ms, fused norms ") != std::string::npos);
  CHECK(trial.err.find("fused norms: ") != std::string::npos);  // the fused candidate's steps ran fused
  // Too few steps to compare: the line says so, and the tokens are the same.
  const Result short_run = qrun(common + " -n 6 --decode trial");
  REQUIRE(short_run.code == 0);
  CHECK(plain.out.rfind(short_run.out, 0) == 0);
  CHECK(short_run.err.find("decode step: plain (the trial of the decode variants stopped after 5 decode steps") !=
        std::string::npos);
  // The emulator's default is plain, with no trial.
  const Result by_default = qrun(common + " -n 3");
  CHECK(by_default.err.find("decode step:") == std::string::npos);
  CHECK(by_default.err.find("fused norms:") == std::string::npos);
  // Nothing to choose between: the file layout has no fused norms and the emulator no PDL.
  const Result one = qrun(common + " -n 3 --decode trial --weight-layout file");
  REQUIRE(one.code == 0);
  CHECK(one.err.find("--decode trial: this run has one decode variant (plain)") != std::string::npos);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"--decode sideways", "--decode: expected auto, trial, plain, pdl, fused-norm or fused-norm+pdl, got 'sideways'"},
      {"--decode fused-norm --fuse-norm", "--decode names the whole decode variant"},
      {"--decode pdl", "--decode pdl: PDL is a CUDA GPU option"},
      {"--decode no-prefetch", "--decode no-prefetch is the CPU's variant (--device cpu)"},
      {"--decode l1-prefetch", "--decode l1-prefetch is the CPU's variant (--device cpu)"},
      {"--decode fused-norm --weight-layout file", "--decode fused-norm runs on the frag layout's GEMVs"},
      {"--decode trial --launch-times " + kTmp + "trial-times.json", "--decode trial switches the decode variant"}};
  check_refused(common + " -n 2", refused);
  const Result cpu_decode = qrun("--model " + kFiles + "dense-tied.ak48 --prompt-ids 1,2 -n 1 --decode trial");
  CHECK(cpu_decode.code == 2);
  CHECK(cpu_decode.err.find("--decode trial times a device's variants on the run") != std::string::npos);
}

TEST_CASE("qbench --choose-decode and qrun --no-stored-decode refuse what they cannot do, each in one line") {
  const std::string model = kFiles + "dense.ak48";
  const std::string qbench = qt::binary_root() + "/bin/qbench";
  const std::string err = kTmp + "choose-err-" + std::to_string(::getpid());
  auto qbench_err = [&](const std::string& args) {
    const int status = std::system((qbench + " " + args + " >/dev/null 2>" + err).c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 0);
    const std::string e = slurp(err);
    CHECK(lines(e) == 1);
    return e;
  };
  CHECK(qbench_err("--device gpu --model " + model + " --choose-decode --tuned-cache /tmp/x.sqlite")
            .find("unknown device 'gpu'") != std::string::npos);
  CHECK(qbench_err("--model " + model + " --choose-decode --isa scalar --tuned-cache /tmp/x.sqlite").find("--isa does not apply to --choose-decode") !=
        std::string::npos);
  CHECK(qbench_err("--device emu --model " + model + " --choose-decode").find("--tuned-cache FILE") != std::string::npos);
  // A file that is no qtune store is refused untouched.
  const std::string not_store = kTmp + "not-a-store-" + std::to_string(::getpid());
  std::ofstream(not_store) << "hello";
  CHECK(qbench_err("--device emu --model " + model + " --choose-decode --prompt 2 --gen 1 --repeat 1 --tuned-cache " +
                   not_store).find(not_store) != std::string::npos);
  CHECK(slurp(not_store) == "hello");
  std::remove(not_store.c_str());
  std::remove(err.c_str());
  const Result r = qrun("--device emu --model " + model + " --prompt-ids 1,2 -n 1 --no-stored-decode");
  CHECK(r.code != 0);
  CHECK(r.err.find("--no-stored-decode") != std::string::npos);
  CHECK(lines(r.err) == 1);
}

TEST_CASE("qrun refuses an experts' layout the model's experts cannot take, in one line, instead of ignoring it") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"dense.ak48 --expert-layout frag", "--expert-layout frag: the model has no MoE experts"},
      {"moe-norm.int8-asym.moe3 --emu-arch sm90 --expert-layout frag", "not INT8_GW_ASYM"},
      {"moe-norm.q8_0.moe3 --int8-layout trtllm", "--int8-layout trtllm lays out INT8 group-wise experts; this model's are Q8_0"},
      {"dense.ajc1 --int8-layout trtllm", "this model's has none"}};
  for (const auto& [args, needle] : cases) {
    INFO(args);
    const Result r = qrun("--device emu --prompt-ids 5,6 -n 1 --model " + kFiles + args);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(needle) != std::string::npos);
  }
}

TEST_CASE("qrun --launch-times writes every launch of every step with its time, the same tokens, and qtune static "
          "--step --against-launches sets the model's kernels beside them") {
  const std::string times = kTmp + "launch-times.json";
  const std::string common = "--model "s + kFiles + "dense.ak48 --prompt-ids 0,361,239,262,343 -n 3 --temp 0 --no-checks";
  const Result plain = qrun(common + " --device emu");
  const Result timed = qrun(common + " --device emu --launch-times " + times);
  REQUIRE(plain.code == 0);
  REQUIRE(timed.code == 0);
  CHECK(timed.out == plain.out);  // timing changes no result
  CHECK(timed.err.find("launch times of 2 decode steps") != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(slurp(times));
  CHECK(j["schema"] == "qtune-launch-times/1");
  REQUIRE(j["steps"].size() == 3);  // the prompt, then two decode steps
  CHECK(j["steps"][0]["rows"] == 5);
  for (const auto& step : j["steps"]) {
    REQUIRE(!step["launches"].empty());
    double sum = 0;
    for (const auto& l : step["launches"]) {
      CHECK(!l["kernel"].get<std::string>().empty());
      CHECK(l["seconds"].get<double>() > 0);
      CHECK(l["grid"].size() == 3);
      sum += l["seconds"].get<double>();
    }
    CHECK(step["seconds"].get<double>() >= sum);  // the step spans its launches and what lies between them
  }
  CHECK(j["summary"]["steps"] == 2);
  CHECK(j["summary"]["launches"].get<double>() == double(j["steps"][1]["launches"].size()));

  // The step model names the same kernels, as many launches of each, for this model's decode step.
  const std::string json = kTmp + "against-launches.json";
  const int rc = std::system((qt::binary_root() + "/bin/qtune static --gpu sm80 --step decode --model " + kFiles +
                              "dense.ak48 --context 6 --against-launches " + times + " --json " + json + " >/dev/null 2>&1")
                                 .c_str());
  REQUIRE(WIFEXITED(rc));
  REQUIRE(WEXITSTATUS(rc) == 0);
  const nlohmann::json a = nlohmann::json::parse(slurp(json))["against_launches"];
  CHECK(a["steps"] == 2);
  REQUIRE(!a["kernels"].empty());
  for (const auto& k : a["kernels"]) {
    INFO(k["kernel"]);
    CHECK(k["predicted_launches"] == k["measured_launches"]);
  }
  const int wrong = std::system((qt::binary_root() + "/bin/qtune static --gpu sm80 --step prefill --prompt 7 --model " +
                                 kFiles + "dense.ak48 --against-launches " + times + " >/dev/null 2>&1")
                                    .c_str());
  CHECK(WEXITSTATUS(wrong) == 2);  // no step of 7 rows in the file

  const std::string bad = kTmp + "launch-times-bad.json";
  std::ofstream(bad) << R"({"schema": ["qtune-launch-times/1"], "steps": []})";
  const int schema = std::system((qt::binary_root() + "/bin/qtune static --gpu sm80 --step decode --model " + kFiles +
                                  "dense.ak48 --against-launches " + bad + " >/dev/null 2>&1")
                                     .c_str());
  CHECK(WEXITSTATUS(schema) == 2);  // not a launch-times file
  const Result pdl = qrun(common + " --device emu --pdl --launch-times " + times);
  CHECK(pdl.code == 2);
  CHECK(pdl.err.find("--pdl") != std::string::npos);
  const Result cpu = qrun(common + " --launch-times " + times);
  CHECK(cpu.code == 2);
  CHECK(cpu.err.find("--launch-times is a device option") != std::string::npos);
  const Result onto_model = qrun(common + " --device emu --launch-times " + kFiles + "dense.ak48");
  CHECK(onto_model.code == 2);
  CHECK(onto_model.err.find("--launch-times") != std::string::npos);
}
