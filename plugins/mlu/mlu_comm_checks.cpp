// Argument checks of the MLU plugin's collectives. They run on the caller's thread
// before anything is enqueued, so a caller's mistake is an INVALID_ARGUMENT now, not a
// hang or a fault on the device later.
#include "mlu_comm_checks.h"

#include "mlu_error.h"

namespace accel_mlu {

accel_error* check_device_buffer(const accel_buffer& buffer, const char* field, int32_t device) {
  return accel::kit::check_buffer(buffer, field, device);
}

CnclBuffer cncl_moved(accel_dtype dtype, size_t count) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return {cnclFloat32, count};
    case ACCEL_DTYPE_F64:
      return {cnclUint8, count * sizeof(double)};  // moved, never added: bytes suffice
    case ACCEL_DTYPE_F16:
      return {cnclFloat16, count};
    case ACCEL_DTYPE_BF16:
      return {cnclBfloat16, count};
    case ACCEL_DTYPE_I8:
      return {cnclInt8, count};
    case ACCEL_DTYPE_I32:
      return {cnclInt32, count};
    case ACCEL_DTYPE_I64:
      return {cnclInt64, count};
    case ACCEL_DTYPE_U8:
    case ACCEL_DTYPE_BOOL:
      return {cnclUint8, count};
  }
  return {cnclUint8, count};
}

accel_error* cncl_reduced_type(accel_dtype dtype, cnclDataType_t* out) {
  if (dtype == ACCEL_DTYPE_F64) {
    return make_error(ACCEL_STATUS_UNIMPLEMENTED,
                      "args->send.dtype F64 cannot be reduced: CNCL has no float64 type "
                      "(cnclDataType_t); reduce in F32, or move F64 with broadcast or all_gather "
                      "only");
  }
  *out = cncl_moved(dtype, 0).type;
  return nullptr;
}

accel_error* cncl_op(accel_reduce_op op, accel_dtype dtype, cnclReduceOp_t* out) {
  const bool boolean = dtype == ACCEL_DTYPE_BOOL;
  switch (op) {
    case ACCEL_REDUCE_SUM:
      *out = boolean ? cnclMax : cnclSum;
      return nullptr;
    case ACCEL_REDUCE_MAX:
      *out = cnclMax;
      return nullptr;
    case ACCEL_REDUCE_PROD:
      *out = boolean ? cnclMin : cnclProd;
      return nullptr;
    case ACCEL_REDUCE_MIN:
      *out = cnclMin;
      return nullptr;
    case ACCEL_REDUCE_AVG:
      if (boolean) return invalid("args->op AVG is not supported for dtype BOOL");
      return make_error(ACCEL_STATUS_UNIMPLEMENTED,
                        "args->op AVG is not supported by the mlu backend: CNCL has no average "
                        "(cnclReduceOp_t is cnclSum, cnclProd, cnclMax, cnclMin) and this "
                        "host-only plugin has no kernel to divide by the world size; reduce "
                        "with SUM and divide by the world size");
  }
  return invalid("args->op " + std::to_string(static_cast<int>(op)) +
                 " is not a known accel_reduce_op");
}

}  // namespace accel_mlu
