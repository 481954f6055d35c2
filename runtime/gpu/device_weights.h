#pragma once
// A model's weights on a device, uploaded once: each QTensor's arrays under the names kernel families bind
// them by (models' weight_array_name: "q", "scales", "qweight", ...), found again by the view's data address.
// Quantized types keep their file layout (the families read it as is); fp32 and bf16 matrices are stored as
// fp16 "values", the one float weight type the device families take. Norm vectors stay fp32. AWQ INT4,
// INT8_GW_SYM and Q8_0 matrices may instead be stored in the frag layout (kernels_src/fraglinear/frag_layout.h),
// made on the device by the repack family at load time: their arrays are then "bq", "bs" (and "bz" for AWQ),
// which only the op "linear.frag" families read.
// Projections that share their input (q, k, v) may be stored once as their concatenation (add_concatenated):
// one tensor whose rows are the parts' rows in order, and each part a view of its rows, so the device holds
// the weights once and runs either the whole or any part.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "device/api/device.h"
#include "models/core/weights.h"

namespace qt::rt {

struct DeviceTensor {
  WeightType type = WeightType::F16;  // as stored on the device
  int64_t rows = 0, cols = 0, group = 0;  // one expert's, for a stack
  int64_t experts = 0;                    // 0 for a plain tensor
  struct Array {
    dev::DevPtr ptr;
    int64_t bytes = 0;
  };
  std::map<std::string, Array> arrays;  // by weight_array_name
};

class DeviceWeights {
 public:
  explicit DeviceWeights(dev::Device& device) : device_(device) {}
  // How a matrix is kept on the device.
  enum class Storage {
    kFile,  // as in the file (fp32 and bf16 as fp16)
    kFrag,  // the frag layout where it can be (frag_layout_holds' types, a group a multiple of 32), else kFile
    kF16,   // dequantized here, once, and kept only as fp16 "values" (qrun --predequantize: two to four times
            // the memory, for the fp16 GEMMs' prefill speed)
    kFragF16,  // kFrag, and beside it the same weight dequantized once to fp16 "values" where the frag layout
               // holds it (qrun --prefill-f16): decode's GEMVs read the quantized arrays, a prefill's GEMMs the
               // fp16 copy, with no dequant per call; the memory of both
  };
  void add(const QTensor& t, Storage storage = Storage::kFile);
  // A MoE projection's experts: each array as one block of E experts back to back, as the grouped families
  // take them, found again by the stack's base address. `trtllm` stores INT8 group-wise codes in
  // TensorRT-LLM's preprocessed layout (done here, once, at load time). kFrag stores the experts of the types
  // the frag layout holds in it, each repacked on the device ("bq", "bs", "bz", one expert after another),
  // for the op "moe_*.frag" families; other types keep their file layout.
  void add_stack(const ExpertStack& s, bool trtllm, Storage storage = Storage::kFile);
  void add_vector(const std::vector<float>& v);
  // The parts (one type, group and K) stored as one tensor of their rows concatenated, where `storage` keeps a
  // part's rows contiguous: row-major types and fp16 values, or the frag layout when every part is whole
  // 64-column tiles. tensor() then finds each part as a view into it. False, with nothing added, where the
  // storage cannot (AWQ or INT8 group-wise in their in-major file layout, a part of partial tiles): add the
  // parts one by one.
  bool add_concatenated(std::span<const QTensor* const> parts, Storage storage);
  // The bytes add_concatenated() places on the device, 0 where it would refuse.
  static uint64_t concatenated_bytes(std::span<const QTensor* const> parts, Storage storage);
  // The concatenation add_concatenated() made of exactly these parts, in this order; null if none.
  const DeviceTensor* concatenated(std::span<const QTensor* const> parts) const;
  // The bytes add() and add_stack() place on the device for a weight, known before any of it is uploaded.
  static uint64_t bytes_for(const QTensor& t, Storage storage);
  static uint64_t stack_bytes(const ExpertStack& s, Storage storage = Storage::kFile);
  // Throws qt::Error when the tensor or vector was never added (an op on weights prepare() did not see).
  const DeviceTensor& tensor(const QTensor& t) const;
  DeviceTensor::Array vector(const float* host) const;
  uint64_t bytes() const { return bytes_; }
  // Frees the host buffer fp16 weights go through on their way to the device (as large as the largest one).
  void finish_loading() { f16_staging_ = {}; }

 private:
  dev::DevPtr upload(const void* data, size_t bytes);
  dev::DevPtr allocate(size_t bytes);
  using ArrayAt = std::function<dev::DevPtr(const std::string& name, int64_t bytes)>;
  void repack_frag(const QTensor& t, const ArrayAt& at);
  std::span<const uint16_t> f16_values(const QTensor& t);  // valid until the next call
  struct Concatenated {
    std::vector<const void*> parts;  // the parts' data addresses, in order
    DeviceTensor whole;
  };
  dev::Device& device_;
  std::vector<dev::Buffer> buffers_;
  std::map<const void*, DeviceTensor> tensors_;
  std::map<const void*, Concatenated> concatenations_;  // by the first part's data
  std::map<const float*, DeviceTensor::Array> vectors_;
  std::map<std::string, std::shared_ptr<dev::Module>> repack_modules_;  // by family name
  std::vector<uint16_t> f16_staging_;  // Storage::kF16 weights on their way to the device, the largest's size
  uint64_t bytes_ = 0;
};

}  // namespace qt::rt
