// Reference arithmetic of the conformance kit: inputs every rank can compute for any
// rank, and the exact expected results, independent of the plugin's own code.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kit.hpp"

namespace conformance {

namespace {

// Independent of the plugin's bit tricks: exact value v (a double) rounded to the
// format with `mantissa_bits` fraction bits and minimum normal exponent
// `min_exp`, ties to even (nearbyint in the default rounding mode).
double round_to_format(double v, int mantissa_bits, int min_exp) {
  if (v == 0 || std::isnan(v) || std::isinf(v)) return v;
  int e = std::ilogb(v);
  if (e < min_exp) e = min_exp;
  const double ulp = std::ldexp(1.0, e - mantissa_bits);
  return std::nearbyint(v / ulp) * ulp;
}
}  // namespace

uint16_t to_bf16(double v) {
  const float f = static_cast<float>(round_to_format(v, 7, -126));
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}
double from_bf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
double from_f16(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double s = (h & 0x8000) ? -1 : 1;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp(1024 + m, e - 25);
}
uint16_t to_f16(double v) {  // values in range only (the tests stay below 65504)
  const double r = round_to_format(v, 10, -14);
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  const double a = std::fabs(r);
  if (a == 0) return sign;
  int e = std::ilogb(a);
  if (e < -14) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(a, 24)));
  const int m = static_cast<int>(std::ldexp(a, 10 - e)) - 1024;
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | m);
}

size_t size_of(accel_dtype d) {
  switch (d) {
    case ACCEL_DTYPE_F64:
    case ACCEL_DTYPE_I64:
      return 8;
    case ACCEL_DTYPE_F32:
    case ACCEL_DTYPE_I32:
      return 4;
    case ACCEL_DTYPE_F16:
    case ACCEL_DTYPE_BF16:
      return 2;
    default:
      return 1;
  }
}
const char* name_of(accel_dtype d) {
  static const char* names[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64", "bool"};
  return names[d];
}
const char* name_of(accel_reduce_op op) {
  static const char* names[] = {"sum", "avg", "min", "max", "prod"};
  return names[op];
}

// Element value of `rank` at index i, as a double, small enough that sums and
// products over 4 ranks are exact in every dtype (so the order gloo reduces in
// cannot change the result).
double input_value(accel_dtype d, int rank, size_t i) {
  if (d == ACCEL_DTYPE_BOOL) return ((rank + i) % 3) == 0 ? 1 : 0;
  if (d == ACCEL_DTYPE_U8) return static_cast<double>((rank * 7 + i * 3) % 4);
  return static_cast<double>(static_cast<int>((rank * 7 + i * 3) % 5) - 2);
}

void store_value(accel_dtype d, void* data, size_t i, double v) {
  switch (d) {
    case ACCEL_DTYPE_F32:
      static_cast<float*>(data)[i] = static_cast<float>(v);
      break;
    case ACCEL_DTYPE_F64:
      static_cast<double*>(data)[i] = v;
      break;
    case ACCEL_DTYPE_F16:
      static_cast<uint16_t*>(data)[i] = to_f16(v);
      break;
    case ACCEL_DTYPE_BF16:
      static_cast<uint16_t*>(data)[i] = to_bf16(v);
      break;
    case ACCEL_DTYPE_I8:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v);
      break;
    case ACCEL_DTYPE_U8:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v);
      break;
    case ACCEL_DTYPE_I32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v);
      break;
    case ACCEL_DTYPE_I64:
      static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v);
      break;
    case ACCEL_DTYPE_BOOL:
      static_cast<uint8_t*>(data)[i] = v != 0;
      break;
  }
}

double load_value(accel_dtype d, const void* data, size_t i) {
  switch (d) {
    case ACCEL_DTYPE_F32:
      return static_cast<const float*>(data)[i];
    case ACCEL_DTYPE_F64:
      return static_cast<const double*>(data)[i];
    case ACCEL_DTYPE_F16:
      return from_f16(static_cast<const uint16_t*>(data)[i]);
    case ACCEL_DTYPE_BF16:
      return from_bf16(static_cast<const uint16_t*>(data)[i]);
    case ACCEL_DTYPE_I8:
      return static_cast<const int8_t*>(data)[i];
    case ACCEL_DTYPE_U8:
      return static_cast<const uint8_t*>(data)[i];
    case ACCEL_DTYPE_I32:
      return static_cast<const int32_t*>(data)[i];
    case ACCEL_DTYPE_I64:
      return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case ACCEL_DTYPE_BOOL:
      return static_cast<const uint8_t*>(data)[i];
  }
  return 0;
}

// The expected result of op over all ranks' input_value at i, in dtype d.
double reference(accel_dtype d, accel_reduce_op op, size_t i) {
  double acc = input_value(d, 0, i);
  for (int r = 1; r < g.world; ++r) {
    const double v = input_value(d, r, i);
    switch (op) {
      case ACCEL_REDUCE_SUM:
      case ACCEL_REDUCE_AVG:
        acc += v;
        break;
      case ACCEL_REDUCE_PROD:
        acc *= v;
        break;
      case ACCEL_REDUCE_MIN:
        acc = std::min(acc, v);
        break;
      case ACCEL_REDUCE_MAX:
        acc = std::max(acc, v);
        break;
    }
  }
  if (d == ACCEL_DTYPE_BOOL) return acc != 0;
  if (op != ACCEL_REDUCE_AVG) return acc;
  switch (d) {  // divide in the element type
    case ACCEL_DTYPE_F32:
      return static_cast<float>(acc) / static_cast<float>(g.world);
    case ACCEL_DTYPE_F64:
      return acc / g.world;
    case ACCEL_DTYPE_F16:
      return from_f16(to_f16(static_cast<float>(acc) / g.world));
    case ACCEL_DTYPE_BF16:
      return from_bf16(to_bf16(static_cast<float>(acc) / g.world));
    default:
      return static_cast<double>(static_cast<int64_t>(acc) / g.world);  // truncates
  }
}

const accel_dtype kDtypes[9] = {ACCEL_DTYPE_F32,  ACCEL_DTYPE_F64, ACCEL_DTYPE_F16,
                                ACCEL_DTYPE_BF16, ACCEL_DTYPE_I8,  ACCEL_DTYPE_U8,
                                ACCEL_DTYPE_I32,  ACCEL_DTYPE_I64, ACCEL_DTYPE_BOOL};
const accel_reduce_op kOps[5] = {ACCEL_REDUCE_SUM, ACCEL_REDUCE_AVG, ACCEL_REDUCE_MIN,
                                 ACCEL_REDUCE_MAX, ACCEL_REDUCE_PROD};

}  // namespace conformance
