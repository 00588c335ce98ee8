// Reductions for gloo, one function per (dtype, op). gloo calls them on ~1 MiB
// segments of the ring, so they are plain loops the compiler can vectorise.
#include "cpu_reduce.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace accel_cpu {

// --------------------------------------------------------- f16 / bf16 <-> f32

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits = exponent == 0x1fu ? (sign | 0x7f800000u | (mantissa << 13))
                                    : (sign | ((exponent + 112u) << 23) | (mantissa << 13));
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even (after F. Giesen's float_to_half_fast3_rtne).
uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x47800000u) {  // >= 65536, inf or NaN
    const bool nan = magnitude > 0x7f800000u;
    return static_cast<uint16_t>(sign | (nan ? 0x7e00u : 0x7c00u));
  }
  if (magnitude < 0x38800000u) {  // below 2^-14: subnormal half; let the FPU round
    float scaled;
    std::memcpy(&scaled, &magnitude, sizeof scaled);
    scaled += 0.5f;  // ulp of 0.5f is 2^-24, the subnormal half's ulp
    uint32_t rounded;
    std::memcpy(&rounded, &scaled, sizeof rounded);
    return static_cast<uint16_t>(sign | (rounded - 0x3f000000u));
  }
  const uint32_t mantissa_odd = (magnitude >> 13) & 1u;
  magnitude += 0xc8000fffu + mantissa_odd;  // rebias exponent 127 -> 15, round
  return static_cast<uint16_t>(sign | (magnitude >> 13));
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN, sign kept
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

namespace {

// ------------------------------------------------------------ element ops

struct Sum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {  // wrap, without signed-overflow UB
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};
struct Prod {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      using Wide = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
      return static_cast<T>(static_cast<U>(static_cast<Wide>(static_cast<U>(a)) *
                                           static_cast<Wide>(static_cast<U>(b))));
    } else {
      return a * b;
    }
  }
};
// min and max propagate NaN, as LibTorch's do.
struct Min {
  template <class T>
  static T apply(T a, T b) {
    return (a < b || a != a) ? a : b;  // NOLINT(misc-redundant-expression): NaN test
  }
};
struct Max {
  template <class T>
  static T apply(T a, T b) {
    return (a > b || a != a) ? a : b;  // NOLINT(misc-redundant-expression): NaN test
  }
};

template <class T, class Op>
void reduce_native(void* c_, const void* a_, const void* b_, size_t n) {
  T* c = static_cast<T*>(c_);
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; ++i) {
    c[i] = Op::template apply<T>(a[i], b[i]);
  }
}

// f16 / bf16: each element goes through float and is rounded once per reduction.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), class Op>
void reduce_16(void* c_, const void* a_, const void* b_, size_t n) {
  uint16_t* c = static_cast<uint16_t*>(c_);
  const uint16_t* a = static_cast<const uint16_t*>(a_);
  const uint16_t* b = static_cast<const uint16_t*>(b_);
  for (size_t i = 0; i < n; ++i) {
    c[i] = FromFloat(Op::template apply<float>(ToFloat(a[i]), ToFloat(b[i])));
  }
}

// bool: sum and max are OR, prod and min are AND (bytes 0 or 1).
void reduce_or(void* c_, const void* a_, const void* b_, size_t n) {
  uint8_t* c = static_cast<uint8_t*>(c_);
  const uint8_t* a = static_cast<const uint8_t*>(a_);
  const uint8_t* b = static_cast<const uint8_t*>(b_);
  for (size_t i = 0; i < n; ++i) c[i] = static_cast<uint8_t>((a[i] | b[i]) != 0);
}
void reduce_and(void* c_, const void* a_, const void* b_, size_t n) {
  uint8_t* c = static_cast<uint8_t*>(c_);
  const uint8_t* a = static_cast<const uint8_t*>(a_);
  const uint8_t* b = static_cast<const uint8_t*>(b_);
  for (size_t i = 0; i < n; ++i) c[i] = static_cast<uint8_t>(a[i] != 0 && b[i] != 0);
}

template <class Op>
ReduceFn for_dtype(accel_dtype dtype) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return &reduce_native<float, Op>;
    case ACCEL_DTYPE_F64:
      return &reduce_native<double, Op>;
    case ACCEL_DTYPE_F16:
      return &reduce_16<half_to_float, float_to_half, Op>;
    case ACCEL_DTYPE_BF16:
      return &reduce_16<bf16_to_float, float_to_bf16, Op>;
    case ACCEL_DTYPE_I8:
      return &reduce_native<int8_t, Op>;
    case ACCEL_DTYPE_U8:
      return &reduce_native<uint8_t, Op>;
    case ACCEL_DTYPE_I32:
      return &reduce_native<int32_t, Op>;
    case ACCEL_DTYPE_I64:
      return &reduce_native<int64_t, Op>;
    case ACCEL_DTYPE_BOOL:
      break;
  }
  return nullptr;
}

template <class T>
void divide_native(void* data, size_t n, int32_t divisor) {
  T* p = static_cast<T*>(data);
  if constexpr (std::is_integral_v<T>) {  // in int64: a u8 divisor could overflow
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<int64_t>(p[i]) / divisor);
  } else {
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) p[i] = p[i] / d;
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void divide_16(void* data, size_t n, int32_t divisor) {
  uint16_t* p = static_cast<uint16_t*>(data);
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) p[i] = FromFloat(ToFloat(p[i]) / d);
}

}  // namespace

ReduceFn reduce_function(accel_dtype dtype, accel_reduce_op op) {
  if (dtype == ACCEL_DTYPE_BOOL) {
    switch (op) {
      case ACCEL_REDUCE_SUM:
      case ACCEL_REDUCE_MAX:
        return &reduce_or;
      case ACCEL_REDUCE_PROD:
      case ACCEL_REDUCE_MIN:
        return &reduce_and;
      case ACCEL_REDUCE_AVG:
        return nullptr;  // an average of booleans is not a boolean
    }
    return nullptr;
  }
  switch (op) {
    case ACCEL_REDUCE_SUM:
    case ACCEL_REDUCE_AVG:
      return for_dtype<Sum>(dtype);
    case ACCEL_REDUCE_MIN:
      return for_dtype<Min>(dtype);
    case ACCEL_REDUCE_MAX:
      return for_dtype<Max>(dtype);
    case ACCEL_REDUCE_PROD:
      return for_dtype<Prod>(dtype);
  }
  return nullptr;
}

void divide_by(void* data, size_t n, accel_dtype dtype, int32_t divisor) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return divide_native<float>(data, n, divisor);
    case ACCEL_DTYPE_F64:
      return divide_native<double>(data, n, divisor);
    case ACCEL_DTYPE_F16:
      return divide_16<half_to_float, float_to_half>(data, n, divisor);
    case ACCEL_DTYPE_BF16:
      return divide_16<bf16_to_float, float_to_bf16>(data, n, divisor);
    case ACCEL_DTYPE_I8:
      return divide_native<int8_t>(data, n, divisor);
    case ACCEL_DTYPE_U8:
      return divide_native<uint8_t>(data, n, divisor);
    case ACCEL_DTYPE_I32:
      return divide_native<int32_t>(data, n, divisor);
    case ACCEL_DTYPE_I64:
      return divide_native<int64_t>(data, n, divisor);
    case ACCEL_DTYPE_BOOL:
      return;
  }
}

}  // namespace accel_cpu
