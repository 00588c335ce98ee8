// Element-wise reductions of the CPU plugin's collectives, one per (dtype, op), in
// the form gloo's AllreduceOptions::setReduceFunction takes. f16 and bf16 reduce in
// float and round to nearest even on the way back (gloo has no bf16 and its f16 is
// not what we want for avg); integers wrap on overflow as two's complement.
#pragma once

#include <accel/backend.h>

#include <accel/backend_kit.hpp>
#include <cstddef>
#include <cstdint>

namespace accel_cpu {

// c[i] = a[i] (op) b[i] for n elements; c may alias a or b.
using ReduceFn = void (*)(void* c, const void* a, const void* b, size_t n);

// Bytes per element (0 for a dtype the ABI does not define) and the names used in
// messages come from the plugin kit.
using accel::kit::dtype_name;
using accel::kit::dtype_size;
using accel::kit::reduce_op_name;

// The reduction for op over dtype. AVG reduces as SUM (divide afterwards with
// divide_by). NULL when the pair is not supported (bool avg, unknown values).
ReduceFn reduce_function(accel_dtype dtype, accel_reduce_op op);

// data[i] /= divisor in the element type: floats divide exactly and round once
// (f16/bf16 through float); integers use C++ integer division, truncating toward
// zero (so an i32 avg of {1, 2} over 2 ranks is 1, of {-1, -2} is -1).
void divide_by(void* data, size_t n, accel_dtype dtype, int32_t divisor);

// Conversions used by the reductions, exposed for tests.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even; overflow to inf; NaN kept
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);  // round to nearest even; NaN stays a quiet NaN

}  // namespace accel_cpu
