// MUSA runtime failures as accel errors. Only the codes musa_runtime_api.h shares with
// CUDA's runtime name for name are told apart; any other is INTERNAL.
#include "musa_error.h"

namespace accel_musa {
namespace {

// What a MUSA failure means to the host: retrying elsewhere (UNAVAILABLE), fixing the
// call (INVALID_ARGUMENT), freeing memory (OUT_OF_MEMORY), or a bug (INTERNAL).
accel_status_code status_of(musaError_t result) {
  switch (result) {
    case musaErrorMemoryAllocation:
      return ACCEL_STATUS_OUT_OF_MEMORY;
    case musaErrorInvalidValue:
    case musaErrorInvalidDevice:
    case musaErrorInvalidDevicePointer:
    case musaErrorInvalidResourceHandle:
      return ACCEL_STATUS_INVALID_ARGUMENT;
    case musaErrorNoDevice:
    case musaErrorInsufficientDriver:
    case musaErrorDevicesUnavailable:
      return ACCEL_STATUS_UNAVAILABLE;
    case musaErrorNotPermitted:
    case musaErrorNotSupported:
      return ACCEL_STATUS_FAILED_PRECONDITION;
    default:
      return ACCEL_STATUS_INTERNAL;
  }
}

}  // namespace

accel_error* musa_error(const std::string& call, const char* api, musaError_t result) {
  if (result == musaSuccess) return nullptr;
  (void)musaGetLastError();  // clears a non-sticky error so the next call starts clean
  return make_error(status_of(result), call + ": " + api + " failed: " + musaGetErrorName(result) +
                                           ": " + musaGetErrorString(result));
}

}  // namespace accel_musa
