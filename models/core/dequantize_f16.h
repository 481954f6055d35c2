#pragma once
// A whole weight dequantized to fp16 bits [rows][cols] (row-major, the device's "values" layout), fast: for
// loading dense weights as fp16 (qrun --predequantize). Bit for bit float_to_half_bits of the reference
// dequantization (dequantize_row): the same fp32 products of the same widened values, one rounding to fp16.
// The in-major types (AWQ, INT8 group-wise) are read in tiles of 64 output rows by 64 input columns, so
// every word of the file is read once and every output row is written in runs, instead of the reference's
// strided walk down K for each row.
#include <cstdint>

#include "models/core/weights.h"

namespace qt {

// Rows [row0, row1) of `t` into out[(row1 - row0)][t.cols]. One thread; any row range.
void dequantize_rows_f16(const QTensor& t, int64_t row0, int64_t row1, uint16_t* out);

// All of `t` into out[t.rows][t.cols], the rows split over every core (one thread for small tensors).
void dequantize_f16(const QTensor& t, uint16_t* out);

}  // namespace qt
