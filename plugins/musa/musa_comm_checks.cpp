// Argument checks of the MUSA plugin's collectives. They run on the caller's thread
// before anything is enqueued, so a caller's mistake is an INVALID_ARGUMENT now, not
// a hang or an illegal address on the device later.
#include "musa_comm_checks.h"

#include <musa_runtime_api.h>

#include "musa_error.h"

namespace accel_musa {
namespace {

// Plain (pageable, unregistered) host memory is what a caller passes by mistake, e.g.
// a std::vector: MCCL does not check (MCCL_CHECK_POINTERS is off by default) and
// the kernel would fault. Registered host and managed memory are reachable; allow them.
accel_error* check_reachable(const void* data, const std::string& name) {
  musaPointerAttributes attributes{};
  const musaError_t result = musaPointerGetAttributes(&attributes, data);
  if (result != musaSuccess) {
    (void)musaGetLastError();
    return nullptr;  // cannot tell; let MCCL decide
  }
  if (attributes.type != musaMemoryTypeUnregistered) return nullptr;
  return invalid(name +
                 ".data is host memory the device cannot reach; MCCL needs device memory "
                 "(musaMalloc, a MUSA tensor) or registered host memory");
}

}  // namespace

accel_error* check_device_buffer(const accel_buffer& buffer, const char* field, int32_t device) {
  if (accel_error* error = accel::kit::check_buffer(buffer, field, device)) return error;
  if (buffer.count == 0) return nullptr;
  return check_reachable(buffer.data, std::string("args->") + field);
}

mcclDataType_t mccl_type(accel_dtype dtype) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return mcclFloat32;
    case ACCEL_DTYPE_F64:
      return mcclFloat64;
    case ACCEL_DTYPE_F16:
      return mcclFloat16;
    case ACCEL_DTYPE_BF16:
      return mcclBfloat16;
    case ACCEL_DTYPE_I8:
      return mcclInt8;
    case ACCEL_DTYPE_I32:
      return mcclInt32;
    case ACCEL_DTYPE_I64:
      return mcclInt64;
    case ACCEL_DTYPE_U8:
    case ACCEL_DTYPE_BOOL:
      return mcclUint8;
  }
  return mcclUint8;
}

accel_error* mccl_op(accel_reduce_op op, accel_dtype dtype, mcclRedOp_t* out) {
  const bool boolean = dtype == ACCEL_DTYPE_BOOL;
  switch (op) {
    case ACCEL_REDUCE_SUM:
      *out = boolean ? mcclMax : mcclSum;
      return nullptr;
    case ACCEL_REDUCE_MAX:
      *out = mcclMax;
      return nullptr;
    case ACCEL_REDUCE_PROD:
      *out = boolean ? mcclMin : mcclProd;
      return nullptr;
    case ACCEL_REDUCE_MIN:
      *out = mcclMin;
      return nullptr;
    case ACCEL_REDUCE_AVG:
      if (boolean) return invalid("args->op AVG is not supported for dtype BOOL");
      *out = mcclAvg;  // integers: the sum divided by the world size, truncated
      return nullptr;
  }
  return invalid("args->op " + std::to_string(static_cast<int>(op)) +
                 " is not a known accel_reduce_op");
}

}  // namespace accel_musa
