// qrun --predequantize loads the dense weights as fp16: dequantize_f16 (models/core/dequantize_f16.h) makes
// them on every core, and what the device holds must be the reference dequantization rounded to fp16 bit for
// bit. It is, not merely within fp16 rounding: both compute the same fp32 expression of the same widened values
// ((q - z) * s, (q - 128) * s [+ z], q * s) and round it once with the same round-to-nearest-even, so only the
// order of the loops differs.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "common/rng.h"
#include "device/emu/emu_device.h"
#include "models/core/dequantize_f16.h"
#include "runtime/gpu/device_weights.h"

namespace {

using qt::QTensor;
using qt::WeightType;

// A quantized weight's arrays filled with seeded random bytes (scales drawn as small fp16 values, some negative,
// so every product is finite), and the view over them.
struct RandomWeight {
  std::vector<uint8_t> data, scales, zeros, qzeros;
  QTensor t;
  RandomWeight(WeightType type, int64_t n, int64_t k, int32_t g, uint64_t seed) {
    qt::Rng rng(seed);
    auto bytes = [&](size_t count) {
      std::vector<uint8_t> v(count);
      for (auto& b : v) b = uint8_t(rng.uniform() * 256);
      return v;
    };
    auto halves = [&](size_t count) {
      std::vector<uint8_t> v(count * 2);
      for (size_t i = 0; i < count; ++i) {
        const uint16_t h = qt::float_to_half_bits(float(rng.uniform() - 0.5) * 0.1f);
        std::memcpy(v.data() + i * 2, &h, 2);
      }
      return v;
    };
    const size_t groups = size_t(k / g);
    t.type = type, t.rows = n, t.cols = k, t.group_size = g;
    switch (type) {
      case WeightType::AWQ_INT4:
        data = bytes(size_t(n * k / 2)), qzeros = bytes(groups * size_t(n) / 2), scales = halves(groups * size_t(n));
        t.qzeros = reinterpret_cast<const int32_t*>(qzeros.data());
        t.scales_f16 = reinterpret_cast<const uint16_t*>(scales.data());
        break;
      case WeightType::INT8_GW_SYM:
      case WeightType::INT8_GW_ASYM:
        data = bytes(size_t(n * k)), scales = halves(groups * size_t(n)), zeros = halves(groups * size_t(n));
        t.scales_f16 = reinterpret_cast<const uint16_t*>(scales.data());
        if (type == WeightType::INT8_GW_ASYM) t.zeros_f16 = reinterpret_cast<const uint16_t*>(zeros.data());
        break;
      case WeightType::Q8_0: {
        data = bytes(size_t(n * k));
        scales.resize(size_t(n * k / g) * 4);
        for (size_t i = 0; i < scales.size() / 4; ++i) {
          const float s = float(rng.uniform() - 0.5) * 0.02f;
          std::memcpy(scales.data() + i * 4, &s, 4);
        }
        t.scales_f32 = reinterpret_cast<const float*>(scales.data());
        break;
      }
      default: FAIL("not a quantized type");
    }
    t.data = data.data();
  }
};

// Rows [row0, row1) the old way: the reference row, each value rounded to fp16.
std::vector<uint16_t> reference_f16(const QTensor& t, int64_t row0, int64_t row1) {
  std::vector<uint16_t> out(size_t((row1 - row0) * t.cols));
  std::vector<float> row(size_t(t.cols));
  for (int64_t r = row0; r < row1; ++r) {
    qt::dequantize_row(t, r, row.data());
    for (int64_t c = 0; c < t.cols; ++c) out[size_t((r - row0) * t.cols + c)] = qt::float_to_half_bits(row[size_t(c)]);
  }
  return out;
}

constexpr WeightType kTypes[] = {WeightType::AWQ_INT4, WeightType::INT8_GW_SYM, WeightType::INT8_GW_ASYM,
                                 WeightType::Q8_0};

std::unique_ptr<qt::dev::Device> emu() {
  qt::emu::EmuOptions o;
  o.threads = 2;
  return std::make_unique<qt::emu::EmuDevice>(o);
}

}  // namespace

TEST_CASE("fp16 dequantization of whole weights equals the reference rounded to fp16 bit for bit") {
  struct Dims {
    int64_t n, k;
    int32_t g;
  };
  // Rows not a multiple of the 64-row tile, columns not a multiple of the 64-column tile, groups of 32 to K.
  for (const Dims d : {Dims{200, 384, 128}, Dims{64, 96, 32}, Dims{72, 160, 160}, Dims{8, 64, 64}}) {
    for (const WeightType type : kTypes) {
      INFO(qt::weight_type_name(type) << " " << d.n << "x" << d.k << " g" << d.g);
      const RandomWeight w(type, d.n, d.k, d.g, uint64_t(d.n * 31 + d.k + int(type)));
      std::vector<uint16_t> all(size_t(d.n * d.k));
      qt::dequantize_f16(w.t, all.data());
      CHECK(all == reference_f16(w.t, 0, d.n));
      // A range that starts and ends inside an AWQ word and a tile.
      const int64_t r0 = 3, r1 = d.n - 2;
      std::vector<uint16_t> part(size_t((r1 - r0) * d.k));
      qt::dequantize_rows_f16(w.t, r0, r1, part.data());
      CHECK(part == reference_f16(w.t, r0, r1));
    }
  }
}

TEST_CASE("fp16 dequantization rounds infinities and NaN and overflow and subnormals as the reference does") {
  // Q8_0's fp32 scales can be anything: q * s then covers every case of the fp16 rounding.
  RandomWeight w(WeightType::Q8_0, 16, 64, 32, 5);
  const float special[] = {INFINITY, -INFINITY, NAN, 1e30f, 65519.0f / 127, 65520.0f / 127, 6e-8f, -3e-6f,
                           1e-40f, -0.0f, 0.0f, 1.0f, 6.1e-5f / 64, 3.4e38f, -1e-7f, 2.0f / 3};
  std::vector<float> scales(size_t(16 * 64 / 32));
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = special[i % std::size(special)];
  w.t.scales_f32 = scales.data();
  std::vector<uint16_t> all(16 * 64);
  qt::dequantize_f16(w.t, all.data());
  CHECK(all == reference_f16(w.t, 0, 16));
}

TEST_CASE("emu: predequantized weights on the device hold the reference rounded to fp16 bit for bit") {
  using Storage = qt::rt::DeviceWeights::Storage;
  auto device = emu();
  for (const WeightType type : kTypes) {
    INFO(qt::weight_type_name(type));
    qt::rt::DeviceWeights weights(*device);
    // One weight alone, and three (q, k, v) stored as their concatenation, each part a view of its rows.
    const RandomWeight alone(type, 136, 256, 64, 1), q(type, 128, 256, 64, 2), k(type, 64, 256, 64, 3),
        v(type, 64, 256, 64, 4);
    weights.add(alone.t, Storage::kF16);
    const QTensor* parts[] = {&q.t, &k.t, &v.t};
    REQUIRE(weights.add_concatenated(parts, Storage::kF16));
    for (const QTensor* t : {&alone.t, &q.t, &k.t, &v.t}) {
      const qt::rt::DeviceTensor& d = weights.tensor(*t);
      CHECK(d.type == WeightType::F16);
      const qt::rt::DeviceTensor::Array values = d.arrays.at("values");
      REQUIRE(values.bytes == t->rows * t->cols * 2);
      std::vector<uint16_t> held(size_t(t->rows * t->cols));
      device->copy_to_host(held.data(), values.ptr, size_t(values.bytes));
      CHECK(held == reference_f16(*t, 0, t->rows));
    }
  }
}

// Not run by default: the load-time dequantization before (the reference rows, one thread) and after, on one
// Qwen3-8B MLP matrix (12288 x 4096, AWQ g128 and Q8_0 g64). Run: test_predequantize "[.timing]" -s
TEST_CASE("fp16 dequantization of an 8B-sized matrix timed against the reference rows", "[.timing]") {
  using Clock = std::chrono::steady_clock;
  for (const auto& [type, g] : {std::pair{WeightType::AWQ_INT4, 128}, std::pair{WeightType::Q8_0, 64}}) {
    const RandomWeight w(type, 12288, 4096, g, 9);
    auto t0 = Clock::now();
    const std::vector<uint16_t> before = reference_f16(w.t, 0, w.t.rows);
    const double reference_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<uint16_t> after(before.size());
    t0 = Clock::now();
    qt::dequantize_f16(w.t, after.data());
    const double fast_s = std::chrono::duration<double>(Clock::now() - t0).count();
    t0 = Clock::now();
    qt::dequantize_rows_f16(w.t, 0, w.t.rows, after.data());
    const double one_thread_s = std::chrono::duration<double>(Clock::now() - t0).count();
    WARN(qt::weight_type_name(type) << " 12288x4096: reference rows " << reference_s << " s, dequantize_f16 "
                                    << fast_s << " s (all cores), " << one_thread_s << " s (one thread)");
    CHECK(after == before);
  }
}
