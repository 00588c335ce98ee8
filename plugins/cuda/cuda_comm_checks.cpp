// Argument checks of the CUDA plugin's collectives. They run on the caller's thread
// before anything is enqueued, so a caller's mistake is an INVALID_ARGUMENT now, not
// a hang or an illegal address on the device later.
#include "cuda_comm_checks.h"

#include <cuda_runtime_api.h>

#include "cuda_error.h"

namespace accel_cuda {
namespace {

// Plain (pageable, unregistered) host memory is what a caller passes by mistake, e.g.
// a std::vector: NCCL does not check (NCCL_CHECK_POINTERS is off by default) and
// the kernel would fault. Registered host and managed memory are reachable; allow them.
accel_error* check_reachable(const void* data, const std::string& name) {
  cudaPointerAttributes attributes{};
  const cudaError_t result = cudaPointerGetAttributes(&attributes, data);
  if (result != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;  // cannot tell; let NCCL decide
  }
  if (attributes.type != cudaMemoryTypeUnregistered) return nullptr;
  return invalid(name +
                 ".data is host memory the device cannot reach; NCCL needs device memory "
                 "(cudaMalloc, a CUDA tensor) or registered host memory");
}

}  // namespace

accel_error* check_device_buffer(const accel_buffer& buffer, const char* field, int32_t device) {
  if (accel_error* error = accel::kit::check_buffer(buffer, field, device)) return error;
  if (buffer.count == 0) return nullptr;
  return check_reachable(buffer.data, std::string("args->") + field);
}

ncclDataType_t nccl_type(accel_dtype dtype) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return ncclFloat32;
    case ACCEL_DTYPE_F64:
      return ncclFloat64;
    case ACCEL_DTYPE_F16:
      return ncclFloat16;
    case ACCEL_DTYPE_BF16:
      return ncclBfloat16;
    case ACCEL_DTYPE_I8:
      return ncclInt8;
    case ACCEL_DTYPE_I32:
      return ncclInt32;
    case ACCEL_DTYPE_I64:
      return ncclInt64;
    case ACCEL_DTYPE_U8:
    case ACCEL_DTYPE_BOOL:
      return ncclUint8;
  }
  return ncclUint8;
}

accel_error* nccl_op(accel_reduce_op op, accel_dtype dtype, ncclRedOp_t* out) {
  const bool boolean = dtype == ACCEL_DTYPE_BOOL;
  switch (op) {
    case ACCEL_REDUCE_SUM:
      *out = boolean ? ncclMax : ncclSum;
      return nullptr;
    case ACCEL_REDUCE_MAX:
      *out = ncclMax;
      return nullptr;
    case ACCEL_REDUCE_PROD:
      *out = boolean ? ncclMin : ncclProd;
      return nullptr;
    case ACCEL_REDUCE_MIN:
      *out = ncclMin;
      return nullptr;
    case ACCEL_REDUCE_AVG:
      if (boolean) return invalid("args->op AVG is not supported for dtype BOOL");
      *out = ncclAvg;  // integers: the sum divided by the world size, truncated
      return nullptr;
  }
  return invalid("args->op " + std::to_string(static_cast<int>(op)) +
                 " is not a known accel_reduce_op");
}

}  // namespace accel_cuda
