// CUDA runtime failures as accel errors.
#include "cuda_error.h"

namespace accel_cuda {
namespace {

// What a CUDA failure means to the host: retrying elsewhere (UNAVAILABLE), fixing the
// call (INVALID_ARGUMENT), freeing memory (OUT_OF_MEMORY), or a bug (INTERNAL).
accel_status_code status_of(cudaError_t result) {
  switch (result) {
    case cudaErrorMemoryAllocation:
      return ACCEL_STATUS_OUT_OF_MEMORY;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
      return ACCEL_STATUS_INVALID_ARGUMENT;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorDeviceUninitialized:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorStubLibrary:
      return ACCEL_STATUS_UNAVAILABLE;
    case cudaErrorNotPermitted:
    case cudaErrorNotSupported:
      return ACCEL_STATUS_FAILED_PRECONDITION;
    default:
      return ACCEL_STATUS_INTERNAL;
  }
}

}  // namespace

accel_error* cuda_error(const std::string& call, const char* api, cudaError_t result) {
  if (result == cudaSuccess) return nullptr;
  (void)cudaGetLastError();  // clears a non-sticky error so the next call starts clean
  return make_error(status_of(result), call + ": " + api + " failed: " + cudaGetErrorName(result) +
                                           ": " + cudaGetErrorString(result));
}

}  // namespace accel_cuda
