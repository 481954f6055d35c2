#include "models/formats/header.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>

#include "common/error.h"
#include "models/core/config_limits.h"

namespace qt::formats {

static_assert(std::endian::native == std::endian::little, "model files are little-endian; so is every host we support");

namespace {

// Field offsets (FORMATS.md). ajc1 and moe3 share 0..0x2F; ak48 is packed after byte 36.
constexpr int kOffDim = 8, kOffHidden = 12, kOffLayers = 16, kOffHeads = 20, kOffKvHeads = 24, kOffVocab = 28,
              kOffSeqLen = 32;
constexpr int kOffHeadDim = 36, kOffShared = 40, kOffGroup = 44;                       // ajc1 / moe3
constexpr int kOffExperts = 0x30, kOffPerTok = 0x34, kOffNormTopk = 0x38;              // moe3
constexpr int kOffTheta = 0x40, kOffEps = 0x44, kOffExpertType = 0x48, kOffExpertGroup = 0x4C;
constexpr int kAkOffShared = 36, kAkOffHeadDim = 37, kAkOffGroup = 41, kAkOffTheta = 45, kAkOffEps = 49;

// moe3's expert_type field: the code is the index here, the one mapping decode and encode both read.
constexpr WeightType kExpertTypes[] = {WeightType::Q8_0, WeightType::INT8_GW_SYM, WeightType::INT8_GW_ASYM,
                                       WeightType::AWQ_INT4};

template <class T>
T get(const uint8_t* p, int off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}
template <class T>
void put(uint8_t* p, int off, T v) {
  std::memcpy(p + off, &v, sizeof v);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

std::string float_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

[[noreturn]] void bad(const std::string& path, const char* field, const std::string& value, const std::string& why) {
  fail_file(path, std::string("header field ") + field + " = " + value + ": " + why);
}

void require_divides(const std::string& path, const char* field, int64_t g, const char* dim_name, int64_t dim) {
  if (dim % g != 0) {
    bad(path, field, std::to_string(g), std::string("must divide ") + dim_name + " = " + std::to_string(dim));
  }
}

void require_multiple_of_8(const std::string& path, const char* what, int64_t v) {
  if (v % 8 != 0) {
    fail_file(path, std::string("header implies ") + what + " = " + std::to_string(v) +
                        ", but AWQ_INT4 packs 8 output columns per int32 word (must be a multiple of 8)");
  }
}

void require_zero_padding(const uint8_t* p, int begin, int end, const std::string& path) {
  for (int i = begin; i < end; ++i) {
    if (p[i] != 0) {
      fail_file(path, "header byte " + std::to_string(i) + " = " + std::to_string(p[i]) +
                          ": reserved padding must be zero");
    }
  }
}

float resolve_float(const std::string& path, const char* field, float raw, float dflt) {
  if (raw == 0.0f) return dflt;  // 0 (the zero padding of older writers) means the qwen3.c default
  if (!std::isfinite(raw) || !(raw > 0.0f)) bad(path, field, float_text(raw), "must be positive and finite (0 = default)");
  return raw;
}

int32_t bool_field(const std::string& path, const char* field, int32_t raw) {
  if (raw != 0 && raw != 1) bad(path, field, std::to_string(raw), "must be 0 or 1");
  return raw;
}

}  // namespace

uint32_t format_magic(FileFormat f) {
  switch (f) {
    case FileFormat::AJC1: return kMagicAjc1;
    case FileFormat::MOE3: return kMagicMoe3;
    case FileFormat::AK48: return kMagicAk48;
  }
  return 0;
}

int32_t format_version(FileFormat f) {
  switch (f) {
    case FileFormat::AJC1: return kVersionAjc1;
    case FileFormat::MOE3: return kVersionMoe3;
    case FileFormat::AK48: return kVersionAk48;
  }
  return 0;
}

int32_t expert_type_code(WeightType t) {
  for (size_t code = 0; code < std::size(kExpertTypes); ++code)
    if (kExpertTypes[code] == t) return static_cast<int32_t>(code);
  return -1;
}

FileHeader decode_header(const uint8_t* p, uint64_t size, const std::string& path) {
  if (size < kHeaderBytes) {
    fail_file(path, "file is " + std::to_string(size) + " bytes, shorter than the 256-byte model header");
  }
  FileHeader h;
  const uint32_t magic = get<uint32_t>(p, 0);
  if (magic == kMagicAjc1) {
    h.format = FileFormat::AJC1;
  } else if (magic == kMagicMoe3) {
    h.format = FileFormat::MOE3;
  } else if (magic == kMagicAk48) {
    h.format = FileFormat::AK48;
  } else {
    std::string text;
    for (int i = 0; i < 4; ++i) text += (p[i] >= 32 && p[i] < 127) ? static_cast<char>(p[i]) : '.';
    bad(path, "magic", hex32(magic) + " (bytes \"" + text + "\")",
        "not a model file (expected ajc1 0x616A6331, moe3 0x6D6F6533 or ak48 0x616B3438, little-endian)");
  }
  h.version = get<int32_t>(p, 4);
  if (h.version != format_version(h.format)) {
    bad(path, "version", std::to_string(h.version),
        std::string(file_format_name(h.format)) + " files have version " + std::to_string(format_version(h.format)));
  }
  ModelConfig& c = h.config;
  c.dim = get<int32_t>(p, kOffDim);
  c.hidden_dim = get<int32_t>(p, kOffHidden);
  c.n_layers = get<int32_t>(p, kOffLayers);
  c.n_heads = get<int32_t>(p, kOffHeads);
  c.n_kv_heads = get<int32_t>(p, kOffKvHeads);
  c.vocab_size = get<int32_t>(p, kOffVocab);
  c.max_seq_len = get<int32_t>(p, kOffSeqLen);
  if (h.format == FileFormat::AK48) {
    c.arch = ModelArch::Qwen3Dense;
    c.shared_classifier = bool_field(path, "shared_classifier", p[kAkOffShared]) != 0;
    c.head_dim = get<int32_t>(p, kAkOffHeadDim);
    c.group_size = get<int32_t>(p, kAkOffGroup);
    c.rope_theta = resolve_float(path, "rope_theta", get<float>(p, kAkOffTheta), kDefaultRopeTheta);
    c.rms_norm_eps = resolve_float(path, "rms_norm_eps", get<float>(p, kAkOffEps), kDefaultRmsNormEps);
    require_zero_padding(p, kAkOffEps + 4, static_cast<int>(kHeaderBytes), path);
  } else {
    c.head_dim = get<int32_t>(p, kOffHeadDim);
    c.shared_classifier = bool_field(path, "shared_classifier", get<int32_t>(p, kOffShared)) != 0;
    c.group_size = get<int32_t>(p, kOffGroup);
    c.rope_theta = resolve_float(path, "rope_theta", get<float>(p, kOffTheta), kDefaultRopeTheta);
    c.rms_norm_eps = resolve_float(path, "rms_norm_eps", get<float>(p, kOffEps), kDefaultRmsNormEps);
    if (h.format == FileFormat::AJC1) {
      c.arch = ModelArch::Qwen3Dense;
      require_zero_padding(p, kOffExperts, kOffTheta, path);
      require_zero_padding(p, kOffEps + 4, static_cast<int>(kHeaderBytes), path);
    } else {
      c.arch = ModelArch::Qwen3Moe;
      c.num_experts = get<int32_t>(p, kOffExperts);
      c.num_experts_per_tok = get<int32_t>(p, kOffPerTok);
      c.norm_topk_prob = bool_field(path, "norm_topk_prob", get<int32_t>(p, kOffNormTopk)) != 0;
      require_zero_padding(p, kOffNormTopk + 4, kOffTheta, path);
      const int32_t type_code = get<int32_t>(p, kOffExpertType);
      if (type_code < 0 || static_cast<size_t>(type_code) >= std::size(kExpertTypes)) {
        bad(path, "expert_type", std::to_string(type_code),
            "unknown (0 Q8_0, 1 INT8_GW_SYM, 2 INT8_GW_ASYM, 3 AWQ_INT4)");
      }
      h.expert_type = kExpertTypes[static_cast<size_t>(type_code)];
      const int32_t eg = get<int32_t>(p, kOffExpertGroup);
      if (eg < 0 || eg > limits::kMaxGroupSize) {
        bad(path, "expert_group_size", std::to_string(eg),
            "must be in [0, " + std::to_string(limits::kMaxGroupSize) + "] (0 = group_size)");
      }
      if (h.expert_type == WeightType::Q8_0 && eg != 0 && eg != c.group_size) {
        bad(path, "expert_group_size", std::to_string(eg), "Q8_0 experts use group_size; must be 0 or equal to it");
      }
      h.expert_group_size = eg == 0 ? c.group_size : eg;
      require_zero_padding(p, kOffExpertGroup + 4, static_cast<int>(kHeaderBytes), path);
    }
  }
  validate_header(h, path);
  return h;
}

void validate_header(const FileHeader& h, const std::string& source) {
  const ModelConfig& c = h.config;
  const bool moe_format = h.format == FileFormat::MOE3;
  if (c.is_moe() != moe_format) {
    fail_file(source, std::string(file_format_name(h.format)) + " holds " +
                          (moe_format ? "Qwen3-MoE" : "dense Qwen3") + " models only");
  }
  validate_config(c, source);
  const int64_t g = c.group_size;
  require_divides(source, "group_size", g, "dim", c.dim);
  require_divides(source, "group_size", g, "n_heads * head_dim", c.q_dim());
  if (h.format == FileFormat::AJC1 || h.format == FileFormat::AK48) {
    require_divides(source, "group_size", g, "hidden_dim", c.hidden_dim);
  }
  if (h.format == FileFormat::AK48) {
    require_multiple_of_8(source, "n_heads * head_dim", c.q_dim());
    require_multiple_of_8(source, "n_kv_heads * head_dim", c.kv_dim());
    require_multiple_of_8(source, "dim", c.dim);
    require_multiple_of_8(source, "hidden_dim", c.hidden_dim);
  }
  if (h.format != FileFormat::MOE3 && h.expert_type != WeightType::Q8_0) {
    fail_file(source, std::string("expert_type ") + weight_type_name(h.expert_type) + " needs the moe3 format");
  }
  if (moe_format) {
    if (expert_type_code(h.expert_type) < 0) {
      fail_file(source, std::string("expert_type ") + weight_type_name(h.expert_type) +
                            " cannot be stored in moe3 (Q8_0, INT8_GW_SYM, INT8_GW_ASYM or AWQ_INT4)");
    }
    const int64_t eg = h.expert_group_size;
    if (eg < 1 || eg > limits::kMaxGroupSize) {
      bad(source, "expert_group_size", std::to_string(eg), "must be in [1, " + std::to_string(limits::kMaxGroupSize) + "]");
    }
    if (h.expert_type == WeightType::Q8_0 && eg != g) {
      bad(source, "expert_group_size", std::to_string(eg), "Q8_0 experts use group_size = " + std::to_string(g));
    }
    require_divides(source, "expert_group_size", eg, "dim", c.dim);
    require_divides(source, "expert_group_size", eg, "hidden_dim", c.hidden_dim);
    if (h.expert_type == WeightType::AWQ_INT4) {
      require_multiple_of_8(source, "dim", c.dim);
      require_multiple_of_8(source, "hidden_dim", c.hidden_dim);
    }
  }
}

std::array<uint8_t, kHeaderBytes> encode_header(const FileHeader& h) {
  std::array<uint8_t, kHeaderBytes> b{};
  uint8_t* p = b.data();
  const ModelConfig& c = h.config;
  put<uint32_t>(p, 0, format_magic(h.format));
  put<int32_t>(p, 4, format_version(h.format));
  put<int32_t>(p, kOffDim, c.dim);
  put<int32_t>(p, kOffHidden, c.hidden_dim);
  put<int32_t>(p, kOffLayers, c.n_layers);
  put<int32_t>(p, kOffHeads, c.n_heads);
  put<int32_t>(p, kOffKvHeads, c.n_kv_heads);
  put<int32_t>(p, kOffVocab, c.vocab_size);
  put<int32_t>(p, kOffSeqLen, c.max_seq_len);
  const float theta = c.rope_theta == kDefaultRopeTheta ? 0.0f : c.rope_theta;
  const float eps = c.rms_norm_eps == kDefaultRmsNormEps ? 0.0f : c.rms_norm_eps;
  if (h.format == FileFormat::AK48) {
    p[kAkOffShared] = c.shared_classifier ? 1 : 0;
    put<int32_t>(p, kAkOffHeadDim, c.head_dim);
    put<int32_t>(p, kAkOffGroup, c.group_size);
    put<float>(p, kAkOffTheta, theta);
    put<float>(p, kAkOffEps, eps);
    return b;
  }
  put<int32_t>(p, kOffHeadDim, c.head_dim);
  put<int32_t>(p, kOffShared, c.shared_classifier ? 1 : 0);
  put<int32_t>(p, kOffGroup, c.group_size);
  put<float>(p, kOffTheta, theta);
  put<float>(p, kOffEps, eps);
  if (h.format == FileFormat::MOE3) {
    put<int32_t>(p, kOffExperts, c.num_experts);
    put<int32_t>(p, kOffPerTok, c.num_experts_per_tok);
    put<int32_t>(p, kOffNormTopk, c.norm_topk_prob ? 1 : 0);
    put<int32_t>(p, kOffExpertType, expert_type_code(h.expert_type));
    put<int32_t>(p, kOffExpertGroup, h.expert_group_size == c.group_size ? 0 : h.expert_group_size);
  }
  return b;
}

}  // namespace qt::formats
